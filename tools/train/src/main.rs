//! `cargo run -- <corpus|tokenizer|train> [--flag value ...]`: the three steps that make Attention
//! Lab's model, each reading what the previous one wrote under `data/`; then `reference` and
//! `evaluate` read the exported checkpoint back. `tokenizer-reference` writes what the library's
//! tokenizer makes of fixed texts and the corpus, for the app's own encoder's tests. See README.md.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use attention_lab_train::bpe;
use attention_lab_train::control::Segments;
use attention_lab_train::corpus::{self, Document, END_OF_TEXT};
use attention_lab_train::export;
use attention_lab_train::model::ModelConfig;
use attention_lab_train::tokenizer_reference;
use attention_lab_train::train::{TrainConfig, Trainer};
use candle_core::Device;
use serde_json::json;
use sha2::{Digest, Sha256};

type Error = Box<dyn std::error::Error + Send + Sync>;

const DATA: &str = "data";
/// Where the app keeps the shipped checkpoint, and its test references, from this crate's folder.
const SHIPPED: &str = "../../www/models/attention-lab-tiny";
const MODEL_REFERENCE: &str = "../../tests/data/tiny-model/reference.json";
const TOKENIZER_REFERENCE: &str = "../../tests/data/tiny-model/tokenizer-reference.json";
/// Real models' tokenizers (`scripts/real-tokenizers.sh`) and what the library makes of texts with them.
const REAL_TOKENIZERS: &str = "../../tests/data/real-tokenizers";
const REAL_TOKENIZER_REFERENCE: &str = "../../tests/data/real-tokenizer-reference.json";
/// The family fixtures and their reference logits (`fixtures`).
const FIXTURES: &str = "../../tests/data/fixtures";
const SEPARATOR: &str = "\n<|endoftext|>\n";

/// Every candle op allocates its result, megabytes at a time. By default glibc maps each block of
/// 32 MiB or more (the threshold grows only after a free) and returns freed heap to the OS, so the
/// next step faults every page in again: 1.2 M page faults in 3 steps, a third of the time. These
/// settings keep blocks up to 32 MiB (glibc's maximum threshold) on the heap and the heap's free
/// memory in the process: 0.2 M faults and steps 1.4x faster (README.md). glibc reads them only from
/// the environment at start-up, so the binary sets them by running itself once more.
const ALLOCATOR_ENV: (&str, &str) = (
    "GLIBC_TUNABLES",
    "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=17179869184:glibc.malloc.top_pad=1073741824",
);

fn main() {
    if std::env::var_os(ALLOCATOR_ENV.0).is_none()
        && let Ok(exe) = std::env::current_exe()
    {
        let status = Command::new(exe).args(std::env::args_os().skip(1)).env(ALLOCATOR_ENV.0, ALLOCATOR_ENV.1).status();
        match status {
            Ok(s) => std::process::exit(s.code().unwrap_or(1)),
            Err(e) => eprintln!("warning: could not rerun with {}={}: {e}", ALLOCATOR_ENV.0, ALLOCATOR_ENV.1),
        }
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("corpus") => Flags::parse(&args[1..]).and_then(|f| corpus_cmd(&f)),
        Some("tokenizer") => Flags::parse(&args[1..]).and_then(|f| tokenizer_cmd(&f)),
        Some("train") => Flags::parse(&args[1..]).and_then(|f| train_cmd(&f)),
        Some("control") => Flags::parse(&args[1..]).and_then(|f| control_cmd(&f)),
        Some("variants") => Flags::parse(&args[1..]).and_then(|f| variants_cmd(&f)),
        Some("reference") => Flags::parse(&args[1..]).and_then(|f| reference_cmd(&f)),
        Some("evaluate") => Flags::parse(&args[1..]).and_then(|f| evaluate_cmd(&f)),
        Some("fixtures") => Flags::parse(&args[1..]).and_then(|f| f.done()).and_then(|()| fixtures_cmd()),
        Some("tokenizer-reference") => Flags::parse(&args[1..]).and_then(|f| f.done()).and_then(|()| tokenizer_reference_cmd()),
        Some("real-tokenizer-reference") => {
            Flags::parse(&args[1..]).and_then(|f| f.done()).and_then(|()| real_tokenizer_reference_cmd())
        }
        _ => Err(
            "usage: attention-lab-train <corpus|tokenizer|train|control|variants|reference|evaluate|tokenizer-reference|real-tokenizer-reference|fixtures> [--flag value ...] \
             (see README.md)"
                .into(),
        ),
    };
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// `--name value` pairs; every flag read is removed, and a leftover one is an error (a typo).
struct Flags(HashMap<String, String>);

impl Flags {
    fn parse(args: &[String]) -> Result<Self, Error> {
        let mut map = HashMap::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let name = a.strip_prefix("--").ok_or_else(|| format!("expected --flag, got {a}"))?;
            let value = it.next().ok_or_else(|| format!("--{name} needs a value"))?;
            map.insert(name.to_string(), value.clone());
        }
        Ok(Self(map))
    }

    fn get<T: std::str::FromStr>(&mut self, name: &str, default: T) -> Result<T, Error> {
        match self.0.remove(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| format!("--{name}: cannot read {v:?}").into()),
        }
    }

    fn done(&self) -> Result<(), Error> {
        match self.0.keys().next() {
            Some(k) => Err(format!("unknown flag --{k}").into()),
            None => Ok(()),
        }
    }
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn rustc_sysroot() -> Result<PathBuf, Error> {
    let out = Command::new("rustc").args(["--print", "sysroot"]).output()?;
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

/// corpus [--docs DIR]: extracts the five books into data/corpus/{train,heldout}.txt.
fn corpus_cmd(flags: &Flags) -> Result<(), Error> {
    let mut flags = Flags(flags.0.clone());
    let sysroot = rustc_sysroot()?;
    let docs: PathBuf = flags.get("docs", sysroot.join("share/doc/rust/html"))?;
    flags.done()?;
    // The toolchain that installed the docs: <toolchain>/share/doc/rust/html.
    let toolchain = docs.ancestors().nth(4).ok_or("--docs is not <toolchain>/share/doc/rust/html")?;
    let rustc = Command::new(toolchain.join("bin/rustc")).arg("--version").output()?;
    let rustc_version = String::from_utf8(rustc.stdout)?.trim().to_string();
    let start = Instant::now();
    let docs_list = corpus::extract_all(&docs)?;
    let out = Path::new(DATA).join("corpus");
    std::fs::create_dir_all(&out)?;
    let (mut train, mut heldout, mut index) =
        (String::new(), String::new(), String::from("index\tsplit\tbytes\tsource\n"));
    let mut per_book: HashMap<&str, [usize; 2]> = HashMap::new();
    for (i, d) in docs_list.iter().enumerate() {
        let held = Document::is_held_out(i);
        let target = if held { &mut heldout } else { &mut train };
        target.push_str(&d.text);
        target.push_str(SEPARATOR);
        let split = if held { "heldout" } else { "train" };
        index.push_str(&format!("{i}\t{split}\t{}\t{}\n", d.text.len(), d.source));
        let book = corpus::BOOKS.iter().find(|b| d.source.starts_with(&format!("{b}/"))).copied().unwrap_or("?");
        let e = per_book.entry(book).or_default();
        e[0] += 1;
        e[1] += d.text.len();
    }
    std::fs::write(out.join("train.txt"), &train)?;
    std::fs::write(out.join("heldout.txt"), &heldout)?;
    std::fs::write(out.join("documents.tsv"), &index)?;
    let books: serde_json::Map<String, serde_json::Value> = corpus::BOOKS
        .iter()
        .map(|b| {
            (
                b.to_string(),
                json!({"documents": per_book.get(b).map_or(0, |e| e[0]), "bytes": per_book.get(b).map_or(0, |e| e[1])}),
            )
        })
        .collect();
    let manifest = json!({
        "toolchain": rustc_version,
        "source": "the rust-docs component of that toolchain: share/doc/rust/html/{book,reference,rust-by-example,cargo,nomicon}",
        "held_out_rule": format!("document i (0-based, corpus order) is held out when (i + 1) % {} == 0", corpus::HELD_OUT_EVERY),
        "document_separator": END_OF_TEXT,
        "books": books,
        "files": {
            "train.txt": {"bytes": train.len(), "sha256": sha256(train.as_bytes())},
            "heldout.txt": {"bytes": heldout.len(), "sha256": sha256(heldout.as_bytes())},
            "documents.tsv": {"bytes": index.len(), "sha256": sha256(index.as_bytes())},
        },
    });
    std::fs::write(out.join("manifest.json"), serde_json::to_string_pretty(&manifest)? + "\n")?;
    println!(
        "{} documents ({} held out) from {rustc_version}: train {} bytes, held-out {} bytes, in {:.1} s",
        docs_list.len(),
        docs_list.len() / corpus::HELD_OUT_EVERY,
        train.len(),
        heldout.len(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The documents of a corpus file.
fn documents(path: &Path) -> Result<Vec<String>, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e} (run `corpus` first)", path.display()))?;
    Ok(text.split(SEPARATOR).filter(|d| !d.is_empty()).map(str::to_string).collect())
}

/// tokenizer [--vocab 4096]: trains byte-level BPE on the training split, writes data/tokenizer.json.
fn tokenizer_cmd(flags: &Flags) -> Result<(), Error> {
    let mut flags = Flags(flags.0.clone());
    let vocab: usize = flags.get("vocab", 4096)?;
    flags.done()?;
    let corpus = Path::new(DATA).join("corpus");
    let train = documents(&corpus.join("train.txt"))?;
    let heldout = documents(&corpus.join("heldout.txt"))?;
    let start = Instant::now();
    let tok = bpe::train(train.iter().map(String::as_str), vocab)?;
    let train_secs = start.elapsed().as_secs_f64();
    tok.save(Path::new(DATA).join("tokenizer.json"), false)?;
    let start = Instant::now();
    let (mut tokens, mut bytes) = (0usize, 0usize);
    for d in &heldout {
        let ids = bpe::encode(&tok, d)?;
        if bpe::decode(&tok, &ids)? != *d {
            return Err("held-out text does not round-trip".into());
        }
        tokens += ids.len();
        bytes += d.len();
    }
    println!(
        "vocab {}: trained in {train_secs:.1} s; held-out {bytes} bytes -> {tokens} tokens ({:.3} tokens/byte, {:.2} bytes/token), encoded and decoded in {:.1} s",
        tok.get_vocab_size(true),
        tokens as f64 / bytes as f64,
        bytes as f64 / tokens as f64,
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// real-tokenizer-reference: the library's ids with real models' tokenizers and variants of them (see
/// `real_tokenizer_reference`), written to REAL_TOKENIZER_REFERENCE.
fn real_tokenizer_reference_cmd() -> Result<(), Error> {
    use attention_lab_train::real_tokenizer_reference::{VARIANTS, patched, reference};
    let corpus_file = "tools/train/data/corpus/heldout.txt";
    let corpus = std::fs::read_to_string(Path::new(DATA).join("corpus/heldout.txt"))?;
    let start = Instant::now();
    let mut variants = Vec::new();
    for variant in VARIANTS {
        let path = Path::new(REAL_TOKENIZERS).join(variant.file);
        let bytes =
            std::fs::read(&path).map_err(|e| format!("{}: {e} (run scripts/real-tokenizers.sh)", path.display()))?;
        let json = patched(std::str::from_utf8(&bytes)?, variant)?;
        let tok: tokenizers::Tokenizer = json.parse()?;
        variants.push(reference(&tok, variant, &sha256(&bytes), (corpus_file, &corpus))?);
        println!("{}: {:.1} s", variant.name, start.elapsed().as_secs_f64());
    }
    let out = json!({
        "about": "Token ids from the tokenizers library 0.22 (tools/train, `cargo run -- real-tokenizer-reference`) for real models' tokenizer.json files (scripts/real-tokenizers.sh; `file` under tests/data/real-tokenizers, its SHA-256, and fields replaced by `patch`, a key a.b naming field b of field a; built with the unstable_wasm features, so the Split patterns run in fancy-regex): tokenizer.encode(text, false).get_ids(), and encode(text, true) for with_special_tokens.",
        "checksum": "h = 0; for id in ids { h = h * 1000003 + (id + 1) } in wrapping u64 arithmetic, as a decimal string",
        "variants": variants,
    });
    std::fs::write(REAL_TOKENIZER_REFERENCE, serde_json::to_string_pretty(&out)? + "\n")?;
    println!("{REAL_TOKENIZER_REFERENCE} written");
    Ok(())
}

/// tokenizer-reference: the library's ids for fixed texts and the corpus files (see
/// `tokenizer_reference::reference`), written to TOKENIZER_REFERENCE.
fn tokenizer_reference_cmd() -> Result<(), Error> {
    let tok_path = Path::new(DATA).join("tokenizer.json");
    let tok = bpe::load(&tok_path)?;
    let corpus = Path::new(DATA).join("corpus");
    let read = |name: &str| {
        std::fs::read_to_string(corpus.join(name)).map_err(|e| format!("{name}: {e} (run `corpus` first)"))
    };
    let (train, heldout) = (read("train.txt")?, read("heldout.txt")?);
    let start = Instant::now();
    let mut reference = tokenizer_reference::reference(
        &tok,
        &[("tools/train/data/corpus/train.txt", &train), ("tools/train/data/corpus/heldout.txt", &heldout)],
    )?;
    reference["tokenizer_sha256"] = sha256(&std::fs::read(&tok_path)?).into();
    let out = Path::new(TOKENIZER_REFERENCE);
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(out, serde_json::to_string_pretty(&reference)? + "\n")?;
    println!("{} written in {:.1} s", out.display(), start.elapsed().as_secs_f64());
    Ok(())
}

/// Token ids of every document, each followed by <|endoftext|>.
fn token_stream(tok: &tokenizers::Tokenizer, docs: &[String]) -> Result<Vec<u32>, Error> {
    let eot = bpe::end_of_text_id(tok)?;
    let mut ids = Vec::new();
    for d in docs {
        ids.extend(bpe::encode(tok, d)?);
        ids.push(eot);
    }
    Ok(ids)
}

/// The model flags' defaults for `train` (the pilots' model); `vocab_size` and
/// `max_position_embeddings` are set from the tokenizer and the context.
const DEFAULT_LAYOUT: ModelConfig = ModelConfig {
    vocab_size: 0,
    hidden_size: 128,
    layers: 4,
    query_heads: 8,
    kv_heads: 2,
    head_dim: 32,
    intermediate_size: 384,
    sliding_window: 64,
    global_every: 4,
    rope_theta: 10000.0,
    rms_norm_eps: 1e-6,
    max_position_embeddings: 0,
    mla: None,
};

/// --hidden, --layers, --heads, --kv-heads, --head-dim, --ff, --window, --global-every, --rope-theta.
fn model_flags(f: &mut Flags, d: ModelConfig) -> Result<ModelConfig, Error> {
    Ok(ModelConfig {
        hidden_size: f.get("hidden", d.hidden_size)?,
        layers: f.get("layers", d.layers)?,
        query_heads: f.get("heads", d.query_heads)?,
        kv_heads: f.get("kv-heads", d.kv_heads)?,
        head_dim: f.get("head-dim", d.head_dim)?,
        intermediate_size: f.get("ff", d.intermediate_size)?,
        sliding_window: f.get("window", d.sliding_window)?,
        global_every: f.get("global-every", d.global_every)?,
        rope_theta: f.get("rope-theta", d.rope_theta)?,
        ..d
    })
}

/// --seed, --steps, --batch, --lr, --final-lr-ratio, --warmup, --weight-decay, --grad-clip,
/// --eval-every, --max-secs; no repeats or copy windows.
fn schedule_flags(f: &mut Flags, steps: usize, context: usize, model: ModelConfig) -> Result<TrainConfig, Error> {
    let steps = f.get("steps", steps)?;
    Ok(TrainConfig {
        seed: f.get("seed", 1)?,
        steps,
        batch: f.get("batch", 16)?,
        context_tokens: context,
        peak_lr: f.get("lr", 3e-3)?,
        final_lr_ratio: f.get("final-lr-ratio", 0.1)?,
        warmup_steps: f.get("warmup", (steps / 20).max(1))?,
        weight_decay: f.get("weight-decay", 0.1)?,
        grad_clip: f.get("grad-clip", 1.0)?,
        eval_every: f.get("eval-every", 100)?,
        eval_windows: 0,
        repeat_share: 0.0,
        repeat_random: 0.0,
        copy_curriculum_steps: 0,
        copy_windows: 0.0,
        copy_segments: Segments::default(),
        copy_context: None,
        copy_until_induction: None,
        max_secs: Some(f.get("max-secs", 0.0f64)?).filter(|&s| s > 0.0),
        model: ModelConfig { max_position_embeddings: context, ..model },
    })
}

/// train [--flags]: trains the model; writes loss.csv, the checkpoint and recipe.json into --out.
fn train_cmd(flags: &Flags) -> Result<(), Error> {
    let mut f = Flags(flags.0.clone());
    let out: PathBuf = f.get("out", PathBuf::from("runs/latest"))?;
    let model = model_flags(&mut f, DEFAULT_LAYOUT)?;
    let context = f.get("context", 256)?;
    let mut cfg = schedule_flags(&mut f, 2000, context, model)?;
    cfg.eval_windows = f.get("eval-windows", 64)?;
    cfg.repeat_share = f.get("repeat-share", 0.0)?;
    cfg.repeat_random = f.get("repeat-random", 0.0)?;
    cfg.copy_curriculum_steps = f.get("copy-curriculum", 0)?;
    cfg.copy_windows = f.get("copy-windows", 0.0)?;
    cfg.copy_segments = Segments { min_len: f.get("copy-min-len", 32)?, max_len: f.get("copy-max-len", 63)? };
    cfg.copy_context = Some(f.get("copy-context", 0)?).filter(|&c| c > 0);
    cfg.copy_until_induction = Some(f.get("copy-until-induction", 0.0)?).filter(|&x| x > 0.0);
    let profile_steps: usize = f.get("profile", 0)?;
    let resume: bool = f.get("resume", false)?;
    // A successor of an exported model: its weights are the start (the recipe's seed then only orders the data).
    let init_from: Option<PathBuf> = Some(f.get("init-from", PathBuf::new())?).filter(|p| !p.as_os_str().is_empty());
    f.done()?;
    let seg = cfg.copy_segments;
    if !cfg.model.query_heads.is_multiple_of(cfg.model.kv_heads) || seg.min_len == 0 || seg.min_len > seg.max_len {
        return Err("--heads must be a multiple of --kv-heads, and 0 < --copy-min-len <= --copy-max-len".into());
    }
    if cfg.copy_context.is_some_and(|c| c < 2 || c > cfg.context_tokens) {
        return Err("--copy-context must be 2 to --context tokens".into());
    }
    let tok_path = Path::new(DATA).join("tokenizer.json");
    let tok = bpe::load(&tok_path)?;
    cfg.model.vocab_size = tok.get_vocab_size(true);
    cfg.model.max_position_embeddings = cfg.context_tokens;
    let corpus = Path::new(DATA).join("corpus");
    let start = Instant::now();
    let train = token_stream(&tok, &documents(&corpus.join("train.txt"))?)?;
    let heldout = token_stream(&tok, &documents(&corpus.join("heldout.txt"))?)?;
    println!(
        "{} train tokens, {} held-out tokens (encoded in {:.1} s); model {} parameters; {} threads",
        train.len(),
        heldout.len(),
        start.elapsed().as_secs_f64(),
        cfg.model.parameters(),
        candle_core::utils::get_num_threads()
    );
    // The run's state, written at every evaluation, so `--resume true` with the same flags goes on.
    let state_dir = out.join("resume");
    // Which weights the run started from, hashed now: the directory may hold others by the time it ends.
    let started_from = match (&init_from, resume) {
        (Some(dir), false) => {
            json!({ "dir": dir, "model_sha256": sha256(&std::fs::read(dir.join("model.safetensors"))?) })
        }
        _ => serde_json::Value::Null,
    };
    let mut trainer = match (resume, &init_from) {
        (true, _) => Trainer::resume(cfg.clone(), Device::Cpu, &state_dir)?,
        (false, Some(dir)) => Trainer::from_checkpoint(cfg.clone(), Device::Cpu, dir)?,
        (false, None) => Trainer::new(cfg.clone(), Device::Cpu)?,
    };
    trainer.state_dir = Some(state_dir);
    if profile_steps > 0 {
        let [fwd, loss, bwd, opt] = attention_lab_train::train::profile(&mut trainer, &train, profile_steps)?;
        let n = profile_steps as f64;
        let tokens = (cfg.batch * cfg.context_tokens) as f64;
        println!(
            "per step: forward {:.3} s, loss {:.3} s, backward {:.3} s, optimiser {:.3} s; {:.0} tokens/s",
            fwd / n,
            loss / n,
            bwd / n,
            opt / n,
            tokens * n / (fwd + loss + bwd + opt)
        );
        return Ok(());
    }
    std::fs::create_dir_all(&out)?;
    let summary = trainer.run(&train, &heldout, &out)?;
    let eot = bpe::end_of_text_id(&tok)?;
    export::save(&out, &cfg.model, &trainer.weights, eot)?;
    std::fs::copy(&tok_path, out.join("tokenizer.json"))?;
    let manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(corpus.join("manifest.json"))?)?;
    let recipe = json!({
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "train": cfg,
        "corpus": manifest["files"],
        "toolchain": manifest["toolchain"],
        "tokenizer_sha256": sha256(&std::fs::read(&tok_path)?),
        "summary": summary,
        "resumed_at_step": (trainer.resumed_at() > 0).then_some(trainer.resumed_at()),
        "init_from": started_from,
        "threads": candle_core::utils::get_num_threads(),
    });
    std::fs::write(out.join("recipe.json"), serde_json::to_string_pretty(&recipe)? + "\n")?;
    println!("{summary:?}");
    Ok(())
}

/// variants [--flags]: MHA, GQA, MQA and MLA over `--seeds` seeds (1..=N) with one recipe
/// (`variants.rs`); the model flags' defaults are the shipped layout's; --rank and --rope-dim shape MLA.
fn variants_cmd(flags: &Flags) -> Result<(), Error> {
    use attention_lab_train::{mla::Mla, variants};
    let mut f = Flags(flags.0.clone());
    let out: PathBuf = f.get("out", PathBuf::from("runs/variants"))?;
    let shipped = ModelConfig { hidden_size: 192, intermediate_size: 512, ..DEFAULT_LAYOUT };
    let mut model = model_flags(&mut f, shipped)?;
    let mla = Mla { kv_rank: f.get("rank", 112)?, rope_dim: f.get("rope-dim", 16)? };
    let seeds: u64 = f.get("seeds", 2)?;
    let context = f.get("context", 128)?;
    let tok_path = Path::new(DATA).join("tokenizer.json");
    let tok = bpe::load(&tok_path)?;
    model.vocab_size = tok.get_vocab_size(true);
    let mut recipe = schedule_flags(&mut f, 600, context, model)?;
    recipe.eval_windows = f.get("eval-windows", 64)?;
    f.done()?;
    if !recipe.model.query_heads.is_multiple_of(recipe.model.kv_heads) || mla.rope_dim % 2 == 1 || seeds == 0 {
        return Err("--heads must be a multiple of --kv-heads, --rope-dim even, --seeds at least 1".into());
    }
    let corpus = Path::new(DATA).join("corpus");
    let train = token_stream(&tok, &documents(&corpus.join("train.txt"))?)?;
    let heldout = token_stream(&tok, &documents(&corpus.join("heldout.txt"))?)?;
    std::fs::create_dir_all(&out)?;
    let all = variants::variants(&recipe.model, mla);
    let seeds: Vec<u64> = (1..=seeds).collect();
    let rows = variants::train_all(&all, &seeds, &recipe, (&train, &heldout), &out)?;
    print!("{}", variants::markdown(&rows));
    Ok(())
}

/// control [--flags]: the induction-head control (`control.rs`): by default a 2-layer attention-only
/// model, width 64, 4 heads of 16, on windows of repeated random segments; writes loss.csv,
/// scores.json and recipe.json into --out.
fn control_cmd(flags: &Flags) -> Result<(), Error> {
    use attention_lab_train::control;
    let mut f = Flags(flags.0.clone());
    let out: PathBuf = f.get("out", PathBuf::from("runs/control"))?;
    let defaults = ModelConfig {
        vocab_size: f.get("vocab", 4096)?,
        hidden_size: 64,
        layers: 2,
        query_heads: 4,
        kv_heads: 4,
        head_dim: 16,
        intermediate_size: 0,
        global_every: 1,
        ..DEFAULT_LAYOUT
    };
    let model = model_flags(&mut f, defaults)?;
    let context = f.get("context", 128)?;
    let mut cfg = schedule_flags(&mut f, 3000, context, model)?;
    let seg = Segments { min_len: f.get("min-len", 32)?, max_len: f.get("max-len", 63)? };
    cfg.copy_segments = seg;
    f.done()?;
    if !cfg.model.query_heads.is_multiple_of(cfg.model.kv_heads) || seg.min_len == 0 || seg.min_len > seg.max_len {
        return Err("--heads must be a multiple of --kv-heads, and 0 < --min-len <= --max-len".into());
    }
    std::fs::create_dir_all(&out)?;
    println!("control: {} parameters; {} threads", cfg.model.parameters(), candle_core::utils::get_num_threads());
    let summary = control::run(&cfg, &out)?;
    let recipe = json!({
        "command": std::env::args().collect::<Vec<_>>().join(" "),
        "train": cfg,
        "parameters": cfg.model.parameters(),
        "threads": candle_core::utils::get_num_threads(),
        "summary": {
            "steps_done": summary.steps_done,
            "tokens_seen": summary.tokens_seen,
            "wall_secs": summary.wall_secs,
            "final_train_loss": summary.final_train_loss,
            "first_step_induction_0_4": summary.first_step_induction_0_4,
        },
    });
    std::fs::write(out.join("recipe.json"), serde_json::to_string_pretty(&recipe)? + "\n")?;
    let scores = json!({"before_training": summary.initial, "after_training": summary.last});
    std::fs::write(out.join("scores.json"), serde_json::to_string_pretty(&scores)? + "\n")?;
    println!(
        "{} steps in {:.0} s; copies {:.3} -> {:.3}; best induction {:.3}",
        summary.steps_done,
        summary.wall_secs,
        summary.last.first_copy_loss,
        summary.last.second_copy_loss,
        summary.last.best_induction().0
    );
    Ok(())
}

/// reference [--checkpoint DIR] [--out FILE]: the checkpoint's logits and attention for fixed inputs.
/// Texts whose last position's logits each fixture's reference holds: a short one, and one longer
/// than Mistral's 8-key window.
const FIXTURE_TEXTS: [&str; 2] = ["fn main() {", "let v = vec![1, 22, 333];\nfor x in &v {\n    println!(\"{x}\");\n}"];

fn fixtures_cmd() -> Result<(), Error> {
    use attention_lab_train::fixtures::{self, last_logits, summary};
    let shipped_path = Path::new(SHIPPED).join("tokenizer.json");
    let shipped = bpe::load(&shipped_path)?;
    let mut entries = serde_json::Map::new();
    for (i, f) in fixtures::fixtures().iter().enumerate() {
        let dir = Path::new(FIXTURES).join(f.name);
        let weights = fixtures::save(f, &dir, 0xf1c5 + i as u64)?;
        // A fixture with its own pipeline gets its own tokenizer.json, and its cases' ids.
        let own = match &f.tokenizer {
            Some((pre, post)) => {
                let mut file: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&shipped_path)?)?;
                (file["pre_tokenizer"], file["post_processor"]) = (pre.clone(), post.clone());
                let path = dir.join("tokenizer.json");
                std::fs::write(&path, serde_json::to_string(&file)? + "\n")?;
                Some(bpe::load(&path)?)
            }
            None => None,
        };
        let tok = own.as_ref().unwrap_or(&shipped);
        let mut inputs = Vec::new();
        for text in FIXTURE_TEXTS {
            let ids = bpe::encode(tok, text)?;
            inputs.push(summary(text, &ids, &last_logits(f, &weights, &ids)?));
        }
        let mut entry = json!({ "about": f.about, "inputs": inputs });
        if own.is_some() {
            let cases = attention_lab_train::tokenizer_reference::CASES
                .iter()
                .map(|text| Ok(json!({"text": text, "ids": bpe::encode(tok, text)?})))
                .collect::<Result<Vec<_>, Error>>()?;
            entry["tokenizer_cases"] = json!(cases);
        }
        entries.insert(f.name.into(), entry);
        let bytes = std::fs::metadata(dir.join("model.safetensors"))?.len();
        println!("{}: {} ({bytes} bytes of weights)", f.name, dir.display());
    }
    let value = json!({
        "about": "Last-position logits of each fixture by candle-transformers (f32, weights widened from the stored \
                  dtype), tokenised by the `tokenizers` library with www/models/attention-lab-tiny/tokenizer.json or the \
                  fixture's own tokenizer.json: `cargo run -- fixtures` in tools/train",
        "fixtures": entries,
    });
    std::fs::write(Path::new(FIXTURES).join("reference.json"), serde_json::to_string_pretty(&value)? + "\n")?;
    Ok(())
}

fn reference_cmd(flags: &Flags) -> Result<(), Error> {
    use attention_lab_train::reference::{CODE, PROSE, reference, repeated_sequence};
    let mut f = Flags(flags.0.clone());
    let dir: PathBuf = f.get("checkpoint", PathBuf::from(SHIPPED))?;
    let out: PathBuf = f.get("out", PathBuf::from(MODEL_REFERENCE))?;
    f.done()?;
    let (cfg, weights) = attention_lab_train::checkpoint::load(&dir)?;
    let tok = bpe::load(&dir.join("tokenizer.json"))?;
    let eot = bpe::end_of_text_id(&tok)?;
    let long = format!("{PROSE}\n\n{CODE}");
    let mut inputs = Vec::new();
    for (name, text) in [("prose", PROSE), ("code", CODE), ("longer than the window", long.as_str())] {
        inputs.push((name.to_string(), Some(text.to_string()), bpe::encode(&tok, text)?));
    }
    let mut rng = attention_lab_train::rng::Rng::new(7);
    inputs.push(("repeated random tokens".into(), None, repeated_sequence(eot, cfg.vocab_size, 20, &mut rng)));
    let value = reference(&cfg, &weights, &inputs)?;
    if let Some(parent) = out.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(&out, serde_json::to_string(&value)? + "\n")?;
    let lengths: Vec<usize> = inputs.iter().map(|i| i.2.len()).collect();
    println!("wrote {} (inputs of {lengths:?} tokens)", out.display());
    Ok(())
}

/// evaluate [--checkpoint DIR]: baselines, repeated-sequence losses and head scores; writes
/// DIR/quality.json and prints a table.
fn evaluate_cmd(flags: &Flags) -> Result<(), Error> {
    let mut f = Flags(flags.0.clone());
    let dir: PathBuf = f.get("checkpoint", PathBuf::from(SHIPPED))?;
    f.done()?;
    let (cfg, weights) = attention_lab_train::checkpoint::load(&dir)?;
    let tok = bpe::load(&dir.join("tokenizer.json"))?;
    let corpus = Path::new(DATA).join("corpus");
    let train = token_stream(&tok, &documents(&corpus.join("train.txt"))?)?;
    let heldout = token_stream(&tok, &documents(&corpus.join("heldout.txt"))?)?;
    let start = Instant::now();
    let q = attention_lab_train::quality::measure(&cfg, &weights, &train, &heldout, bpe::end_of_text_id(&tok)?)?;
    std::fs::write(dir.join("quality.json"), serde_json::to_string_pretty(&q)? + "\n")?;
    println!(
        "held-out loss {:.4} (unigram {:.4}, bigram {:.4} at weight {:.2}); repeated random tokens: first copy {:.4}, second copy {:.4}  [{:.0} s]",
        q.heldout_loss,
        q.unigram_loss,
        q.bigram_loss,
        q.bigram_weight,
        q.repeat_first_copy_loss,
        q.repeat_second_copy_loss,
        start.elapsed().as_secs_f64()
    );
    println!("| layer | head | previous | induction | sink | local |\n| ---: | ---: | ---: | ---: | ---: | ---: |");
    for (l, heads) in q.heads.iter().enumerate() {
        for (h, s) in heads.iter().enumerate() {
            println!("| {l} | {h} | {:.2} | {:.2} | {:.2} | {:.2} |", s.previous, s.induction, s.sink, s.local);
        }
    }
    Ok(())
}
