//! `blindspot prepare`, `blindspot models` and `blindspot embed`: the PLM
//! engine from the command line.

use std::path::PathBuf;

use blindspot::models::{ModelFiles, Plm, Precision, read_back_blocking, registry, weights};
use burn::tensor::{Device, FloatDType};

use super::CliError;

/// Arguments of `blindspot prepare`.
#[derive(clap::Args)]
pub struct PrepareArgs {
    /// Checkpoint folder (config.json, tokenizer.json, model.safetensors or shards; a
    /// COMET folder: hparams.yaml, checkpoints/model.ckpt and the encoder's config.json
    /// and tokenizer.json; a BLEURT-20 folder: config.json, spm.model, pytorch_model.bin).
    model_dir: PathBuf,
    /// Output `.bpk` file.
    out: PathBuf,
    /// Weight precision: `q8` (int8, per-block scales), `q4` (4-bit levels in int8 storage) or `f32`.
    #[arg(long, default_value = "q8")]
    quant: Precision,
}

/// Arguments of `blindspot embed`.
#[derive(clap::Args)]
pub struct EmbedArgs {
    /// Checkpoint folder or prepared `.bpk` file.
    #[arg(long)]
    model: PathBuf,
    /// Layer to print (default: the last).
    #[arg(long)]
    layer: Option<usize>,
    /// Weight precision: `f32`, `q8` (int8) or `q4` (4-bit levels, int8 storage).
    #[arg(long, default_value = "f32")]
    quant: Precision,
    /// Texts to encode.
    #[arg(required = true)]
    texts: Vec<String>,
}

/// Arguments of `blindspot attention`.
#[derive(clap::Args)]
pub struct AttentionArgs {
    /// Checkpoint folder or prepared `.bpk` file of a BERT-family encoder or GPT-2.
    #[arg(long)]
    model: PathBuf,
    /// Weight precision: `f32`, `q8` (int8) or `q4` (4-bit levels, int8 storage).
    #[arg(long, default_value = "f32")]
    quant: Precision,
    /// Texts to read.
    #[arg(required = true)]
    texts: Vec<String>,
}

/// Prints each text's attention by position (`models::attention_view`) as a
/// JSON line: the 10 x 10 block matrix and the mass by offset.
pub fn run_attention(args: &AttentionArgs) -> Result<(), CliError> {
    let plm = load_plm(&args.model, args.quant)?;
    for text in &args.texts {
        let view = futures::executor::block_on(plm.attention_view(text))
            .map_err(|e| model_error(&args.model, e))?;
        println!("{}", serde_json::to_string(&view).expect("a view is JSON"));
    }
    Ok(())
}

pub(crate) fn model_error(path: &std::path::Path, e: impl std::fmt::Display) -> CliError {
    CliError::Model {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Writes a prepared (optionally int8) model file a site can host.
pub fn run_prepare(args: &PrepareArgs) -> Result<(), CliError> {
    let files =
        ModelFiles::from_path(&args.model_dir).map_err(|e| model_error(&args.model_dir, e))?;
    let bytes = weights::prepare(files, args.quant).map_err(|e| model_error(&args.model_dir, e))?;
    super::write_file(&args.out, &bytes)?;
    eprintln!(
        "wrote {} ({:.1} MB, {})",
        args.out.display(),
        bytes.len() as f64 / 1e6,
        args.quant
    );
    Ok(())
}

/// Lists the model registry (`models.toml`).
pub fn list_models(json: bool) -> Result<(), CliError> {
    let models = registry::models();
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&models).expect("registry serializes")
        );
        return Ok(());
    }
    println!(
        "{:<42} {:<34} {:>8} {:<11} {:>5}  metrics",
        "id", "architecture", "MB", "licence", "layer"
    );
    for m in models {
        let layer = m.layer.map_or("-".into(), |l| l.to_string());
        println!(
            "{:<42} {:<34} {:>8.1} {:<11} {:>5}  {}",
            m.id,
            m.architecture,
            m.size_mb,
            m.licence,
            layer,
            m.metrics.join(",")
        );
    }
    Ok(())
}

/// Where the CLI runs language models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// burn-flex on the CPU.
    Cpu,
    /// burn-flex on the CPU, an int8 model's projections as integer
    /// products (16-bit, what the page's CPU computes: its `int8-i16`
    /// signatures); f32 models compute as on `cpu`.
    CpuI16,
    /// burn-wgpu on the GPU (Vulkan, Metal or DX12).
    Gpu,
    /// burn-wgpu computing in f16, on GPUs with f16 shaders: BERT-family
    /// encoders only (BERTScore within 2.1e-4 of f32 where measured).
    GpuF16,
}

static BACKEND: std::sync::OnceLock<Backend> = std::sync::OnceLock::new();

/// Chooses the backend of every model this process loads (`--device`).
pub(crate) fn use_backend(backend: Backend) {
    // Set once, before any command runs.
    let _ = BACKEND.set(backend);
}

/// The device of the chosen backend, initialised once.
fn device() -> Result<Device, String> {
    match BACKEND.get().copied().unwrap_or(Backend::Cpu) {
        Backend::Cpu | Backend::CpuI16 => Ok(Device::flex()),
        Backend::Gpu => gpu_device(FloatDType::F32),
        Backend::GpuF16 => gpu_device(FloatDType::F16),
    }
}

/// The GPU, computing in `dtype` (set before its first tensor: burn fixes a
/// device's defaults once). One backend per process, so one device.
#[cfg(feature = "gpu-wgpu")]
fn gpu_device(dtype: FloatDType) -> Result<Device, String> {
    static GPU: std::sync::OnceLock<Result<Device, String>> = std::sync::OnceLock::new();
    GPU.get_or_init(|| {
        let mut device = Device::wgpu_options()
            .init()
            .map_err(|e| format!("no usable GPU (burn-wgpu): {e}"))?;
        if dtype != FloatDType::F32 {
            if !device.supports_dtype(dtype) {
                return Err(format!(
                    "this GPU does not compute in {dtype:?} (no f16 shaders): use `--device gpu`"
                ));
            }
            device
                .configure(dtype)
                .map_err(|e| format!("the GPU cannot be set to {dtype:?}: {e:?}"))?;
        }
        first_run_note();
        Ok(device)
    })
    .clone()
}

/// Says so when cubecl has nothing kept yet: its first autotuned run on a
/// machine measures the GPU and tunes each kernel shape before scoring (about
/// 25 s more on an H200), and keeps the results for later runs.
#[cfg(feature = "gpu")]
fn first_run_note() {
    let kept = cubecl::environment::path();
    if !kept.exists() {
        eprintln!(
            "note: first GPU run here: measuring the GPU and tuning kernels first (half a minute \
             or more); the results are kept in {} for later runs",
            kept.display()
        );
    }
}

/// Without autotune (`gpu-wgpu` alone) nothing is measured or tuned first.
#[cfg(all(feature = "gpu-wgpu", not(feature = "gpu")))]
fn first_run_note() {}

#[cfg(not(feature = "gpu-wgpu"))]
fn gpu_device(_: FloatDType) -> Result<Device, String> {
    Err("this build has no GPU support: build with `cargo build --release --features gpu`".into())
}

/// What a model at `path` is called (its registry defaults, such as
/// BERTScore's layer, and signatures go by it): a folder's name; a prepared
/// file's name before its first dot (`roberta-large.int8.bpk`:
/// `roberta-large`), or its folder's for a `model.*` file in a checkpoint
/// folder (`all-MiniLM-L6-v2/model.int8.bpk`).
fn model_name(path: &std::path::Path) -> String {
    use std::path::Path;
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned());
    // `.` and `..` have no name of their own; a linked file is not followed
    // (a hub cache links `model.safetensors` to a blob named by its hash).
    let folder_name = |folder: &Path| {
        name(folder)
            .or_else(|| folder.canonicalize().ok().as_deref().and_then(name))
            .unwrap_or_else(|| "model".into())
    };
    if path.is_dir() {
        return folder_name(path);
    }
    let file = name(path).unwrap_or_default();
    match file.split('.').next().unwrap_or_default() {
        "" | "model" => folder_name(
            path.parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new(".")),
        ),
        stem => stem.to_owned(),
    }
}

/// Loads a checkpoint folder or `.bpk` on the chosen device (`--device`),
/// named as [`model_name`] says, at `precision` (an int8 or q4 `.bpk` always at its own);
/// errors name the path.
pub(crate) fn load_plm(path: &std::path::Path, precision: Precision) -> Result<Plm, CliError> {
    let files = ModelFiles::from_path(path).map_err(|e| model_error(path, e))?;
    let name = model_name(path);
    let device = device().map_err(|e| model_error(path, e))?;
    // A prepared int8 or q4 file loads at its own precision whatever was
    // asked (its f32 weights are gone).
    let precision = match files.stored_precision {
        Precision::F32 => precision,
        stored => stored,
    };
    let integer = BACKEND.get() == Some(&Backend::CpuI16);
    let mut plm = Plm::load_with(&name, files, &device, precision, integer)
        .map_err(|e| model_error(path, e))?;
    if let Some(step) = length_step().map_err(|e| model_error(path, e))? {
        plm.length_step = step;
    }
    Ok(plm)
}

/// `BLINDSPOT_LENGTH_STEP`: what a pass's token count is rounded up to a
/// multiple of, instead of the device's default (`GPU_LENGTH_STEP` on a GPU,
/// 1 on the CPU). For measuring the trade between padding and the shapes a
/// GPU compiles; scores do not change.
fn length_step() -> Result<Option<usize>, String> {
    let Some(value) = std::env::var_os("BLINDSPOT_LENGTH_STEP") else {
        return Ok(None);
    };
    match value.to_str().and_then(|v| v.trim().parse::<usize>().ok()) {
        Some(step @ 1..=512) => Ok(Some(step)),
        _ => Err(format!(
            "BLINDSPOT_LENGTH_STEP must be a whole number of tokens from 1 to 512, not {value:?}"
        )),
    }
}

/// Prints one layer's hidden states per text as JSON lines (`tokens`, `truncated`, `hidden`).
pub fn run_embed(args: &EmbedArgs) -> Result<(), CliError> {
    let plm = load_plm(&args.model, args.quant)?;
    let layers = plm.config.num_layers;
    let layer = args.layer.unwrap_or(layers);
    if layer > layers {
        return Err(model_error(
            &args.model,
            format!("layer {layer} does not exist (0..={layers})"),
        ));
    }
    for text in &args.texts {
        let enc = plm.encode(text).map_err(|e| model_error(&args.model, e))?;
        if enc.truncated {
            eprintln!("note: input cut to the model's {} tokens", enc.tokens.len());
        }
        let ids: Vec<u32> = enc.tokens.iter().map(|t| t.id).collect();
        let out = plm
            .forward(std::slice::from_ref(&ids))
            .map_err(|e| model_error(&args.model, e))?;
        let (values, [_, _, w]) = read_back_blocking(out.hidden_states[layer].clone())
            .map_err(|e| model_error(&args.model, e))?;
        // A GPU pass is padded (`Plm::pass_length`): the real tokens' rows only.
        let hidden: Vec<&[f32]> = (0..ids.len())
            .map(|t| &values[t * w..(t + 1) * w])
            .collect();
        let line = serde_json::json!({ "tokens": ids, "truncated": enc.truncated, "layer": layer, "hidden": hidden });
        println!("{line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::model_name;

    #[test]
    fn prepared_files_are_named_after_their_model() {
        let dir = std::env::temp_dir().join(format!("blindspot-names-{}", std::process::id()));
        let folder = dir.join("all-MiniLM-L6-v2");
        std::fs::create_dir_all(&folder).unwrap();
        for file in ["model.int8.bpk", "roberta-large.int8.bpk"] {
            std::fs::write(folder.join(file), b"").unwrap();
        }
        assert_eq!(model_name(&folder), "all-MiniLM-L6-v2");
        assert_eq!(
            model_name(&folder.join("model.int8.bpk")),
            "all-MiniLM-L6-v2"
        );
        assert_eq!(
            model_name(&folder.join("roberta-large.int8.bpk")),
            "roberta-large"
        );
        // A file linked from elsewhere (a hub cache's blobs) keeps its folder's name.
        let blobs = dir.join("blobs");
        std::fs::create_dir_all(&blobs).unwrap();
        std::fs::write(blobs.join("0123abcd"), b"").unwrap();
        let linked = folder.join("model.q8.bpk");
        std::os::unix::fs::symlink(blobs.join("0123abcd"), &linked).unwrap();
        assert_eq!(model_name(&linked), "all-MiniLM-L6-v2");
        // `.` is named after the folder it stands for.
        let here = std::env::current_dir().unwrap();
        let expected = here.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(model_name(std::path::Path::new(".")), expected);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
