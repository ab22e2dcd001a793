//! Pretrained language models: tokenizers now; the burn model
//! architectures (BERT family, GPT-2) join them in the PLM engine.

pub mod tokenizer;
