//! The training loop: random windows of the training tokens, AdamW with linear warm-up and cosine
//! decay, global gradient-norm clipping, and a held-out loss on fixed windows every `eval_every` steps.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use candle_core::backprop::GradStore;
use candle_core::{Device, Result, Tensor, Var};
use serde::{Deserialize, Serialize};

use crate::adamw::{AdamW, ParamsAdamW};

use crate::control::{PROBE_COLUMNS, Probe, Segments, repeated_window};
use crate::model::{self, ModelConfig, Weights};
use crate::rng::Rng;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrainConfig {
    pub seed: u64,
    pub steps: usize,
    pub batch: usize,
    pub context_tokens: usize,
    pub peak_lr: f64,
    /// The learning rate decays (cosine) from `peak_lr` to `peak_lr * final_lr_ratio`.
    pub final_lr_ratio: f64,
    pub warmup_steps: usize,
    /// Applied to matrices and embeddings only, not to norms and biases.
    pub weight_decay: f64,
    pub grad_clip: f64,
    pub eval_every: usize,
    pub eval_windows: usize,
    /// Share of training windows (0 to 1) in which a span of the window is copied to a later place in
    /// the same window (see `repeat_a_span`): repeated text that only copying can predict, which
    /// rewards induction heads. Held-out windows are never altered.
    #[serde(default)]
    pub repeat_share: f64,
    /// Share of those repeated spans (0 to 1) first overwritten with uniformly random token ids, so
    /// that nothing but the copy can predict the second occurrence (natural text is partly
    /// predictable from bigrams, which lets a model skip learning to copy).
    #[serde(default)]
    pub repeat_random: f64,
    /// Steps at the start (a curriculum) in which every window is a copy window
    /// (`control::repeated_window`: `<|endoftext|>`, then segments of random ids each written twice)
    /// instead of text: data on which the control learns induction heads.
    #[serde(default)]
    pub copy_curriculum_steps: usize,
    /// After the curriculum, the share of windows (0 to 1) that are copy windows.
    #[serde(default)]
    pub copy_windows: f64,
    /// Lengths of the copy windows' segments.
    #[serde(default)]
    pub copy_segments: Segments,
    /// Tokens in each window of the curriculum (`None`: the full context). Shorter windows leave a
    /// query fewer keys to spread its attention over at the start, which is what the plateau before
    /// an induction head is thought to scale with (quadratically in the context, in 2-layer theory).
    #[serde(default)]
    pub copy_context: Option<usize>,
    /// Ends the curriculum early, at the first evaluation (every `eval_every` steps) at which some
    /// head's induction score on the control's repeated sequences reaches this: text then follows
    /// a circuit that exists, instead of a guessed number of steps.
    #[serde(default)]
    pub copy_until_induction: Option<f64>,
    /// Stop early (and still export) after this many seconds: a guard for pilot runs.
    pub max_secs: Option<f64>,
    pub model: ModelConfig,
}

impl TrainConfig {
    pub fn lr_at(&self, step: usize) -> f64 {
        if step < self.warmup_steps {
            return self.peak_lr * (step + 1) as f64 / self.warmup_steps as f64;
        }
        let span = (self.steps - self.warmup_steps).max(1) as f64;
        let progress = ((step - self.warmup_steps) as f64 / span).min(1.0);
        let min = self.peak_lr * self.final_lr_ratio;
        min + (self.peak_lr - min) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
    }
}

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub steps_done: usize,
    pub tokens_seen: usize,
    pub wall_secs: f64,
    pub tokens_per_sec: f64,
    pub final_train_loss: f64,
    pub final_heldout_loss: Option<f64>,
    /// Steps of the copy curriculum done (fewer than asked when `copy_until_induction` ended it).
    pub curriculum_steps: usize,
}

pub struct Trainer {
    pub cfg: TrainConfig,
    pub weights: Weights,
    decay: AdamW,
    no_decay: AdamW,
    rng: Rng,
    device: Device,
    /// Steps of copy windows only: `copy_curriculum_steps`, or fewer once `copy_until_induction` is met.
    curriculum_steps: usize,
    /// Where a resumed run stands (all zero for a new one).
    done: Done,
    /// When set, [`Trainer::run`] writes its whole state here at every evaluation (see `resume`).
    pub state_dir: Option<PathBuf>,
}

/// How far a run has come: what [`Trainer::save_state`] writes beside the tensors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
struct Done {
    steps: usize,
    tokens: usize,
    secs: f64,
}

/// The file [`Trainer::save_state`] writes last: the run's books and the name of its tensors' file.
const STATE_BOOKS: &str = "state.json";

impl Trainer {
    pub fn new(cfg: TrainConfig, device: Device) -> Result<Self> {
        let weights = Weights::init(&cfg.model, cfg.seed, &device)?;
        let named = weights.vars.iter().map(|(name, var)| (name.clone(), var.clone()));
        let (matrices, vectors): (Vec<_>, Vec<_>) = named.partition(|(_, v)| v.rank() >= 2);
        let params = |weight_decay| ParamsAdamW { lr: cfg.lr_at(0), beta1: 0.9, beta2: 0.95, eps: 1e-8, weight_decay };
        let decay = AdamW::new(matrices, params(cfg.weight_decay))?;
        let no_decay = AdamW::new(vectors, params(0.0))?;
        // The batch stream has its own seed, derived from the run's, so initialisation and data order are independent.
        let rng = Rng::new(cfg.seed ^ 0x5EED_BA7C_0000_0001);
        let curriculum_steps = cfg.copy_curriculum_steps;
        Ok(Self {
            cfg,
            weights,
            decay,
            no_decay,
            rng,
            device,
            curriculum_steps,
            done: Done::default(),
            state_dir: None,
        })
    }

    /// A new run that starts from the weights of the checkpoint exported in `dir` (float16, widened)
    /// with fresh optimiser moments: a successor of that model, trained on with this run's recipe. The
    /// checkpoint's layout must be this run's.
    pub fn from_checkpoint(cfg: TrainConfig, device: Device, dir: &Path) -> std::result::Result<Self, crate::bpe::Error> {
        let (layout, start) = crate::checkpoint::load(dir)?;
        if layout != cfg.model {
            return Err(format!("{}: its layout is not this run's ({layout:?})", dir.display()).into());
        }
        let t = Self::new(cfg, device)?;
        if !start.vars.keys().eq(t.weights.vars.keys()) {
            return Err(format!("{}: its tensors are not this layout's", dir.display()).into());
        }
        for (name, var) in &t.weights.vars {
            var.set(start.get(name)?)?;
        }
        Ok(t)
    }

    /// Steps already done when this trainer was made (0 unless resumed).
    pub fn resumed_at(&self) -> usize {
        self.done.steps
    }

    /// Writes everything the run needs to go on into `dir`: weights, both optimisers' moments, the
    /// batch stream's position and the books. The tensors go first, under a name with the step, and the
    /// books (which name them) last, each by rename: a run stopped while writing keeps its last state.
    fn save_state(&self, dir: &Path, done: Done) -> std::io::Result<()> {
        let io = |e: candle_core::Error| std::io::Error::other(e.to_string());
        std::fs::create_dir_all(dir)?;
        let mut tensors: Vec<(String, Tensor)> =
            self.weights.vars.iter().map(|(name, v)| (format!("w.{name}"), v.as_tensor().clone())).collect();
        tensors.extend(self.decay.moments("decay."));
        tensors.extend(self.no_decay.moments("no_decay."));
        let file = format!("state-{}.safetensors", done.steps);
        let map: std::collections::HashMap<String, Tensor> = tensors.into_iter().collect();
        candle_core::safetensors::save(&map, dir.join("tensors.tmp")).map_err(io)?;
        std::fs::rename(dir.join("tensors.tmp"), dir.join(&file))?;
        let books = serde_json::json!({
            "tensors": file,
            "done": done,
            "rng": self.rng.state(),
            "curriculum_steps": self.curriculum_steps,
            "optimiser_steps": [self.decay.steps_taken(), self.no_decay.steps_taken()],
            "train": self.cfg,
        });
        std::fs::write(dir.join("books.tmp"), serde_json::to_string_pretty(&books)? + "\n")?;
        std::fs::rename(dir.join("books.tmp"), dir.join(STATE_BOOKS))?;
        for entry in std::fs::read_dir(dir)? {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if name.starts_with("state-") && name.ends_with(".safetensors") && name != file {
                std::fs::remove_file(dir.join(name))?;
            }
        }
        Ok(())
    }

    /// A run that goes on from the state `save_state` left in `dir`. `cfg` must be the saved run's
    /// (its time limit aside): a different recipe would not continue the same run.
    pub fn resume(cfg: TrainConfig, device: Device, dir: &Path) -> std::result::Result<Self, crate::bpe::Error> {
        let path = dir.join(STATE_BOOKS);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e} (nothing to resume)", path.display()))?;
        let books: serde_json::Value = serde_json::from_str(&text)?;
        let same_recipe = |c: &TrainConfig| serde_json::to_value(TrainConfig { max_secs: None, ..c.clone() });
        let saved: TrainConfig = serde_json::from_value(books["train"].clone())?;
        if same_recipe(&saved)? != same_recipe(&cfg)? {
            return Err(format!("{}: saved by a run with another recipe", dir.display()).into());
        }
        let mut t = Self::new(cfg, device)?;
        let file = books["tensors"].as_str().ok_or("state.json: no tensors file")?;
        let tensors = candle_core::safetensors::load(dir.join(file), &t.device)?;
        for (name, var) in &t.weights.vars {
            var.set(tensors.get(&format!("w.{name}")).ok_or_else(|| format!("{file}: no w.{name}"))?)?;
        }
        let steps: [usize; 2] = serde_json::from_value(books["optimiser_steps"].clone())?;
        t.decay.restore(&tensors, "decay.", steps[0])?;
        t.no_decay.restore(&tensors, "no_decay.", steps[1])?;
        t.rng = Rng::new(books["rng"].as_u64().ok_or("state.json: no rng")?);
        t.curriculum_steps = serde_json::from_value(books["curriculum_steps"].clone())?;
        t.done = serde_json::from_value(books["done"].clone())?;
        Ok(t)
    }

    /// The batch of `step`: random windows of `tokens` (or copy windows, see `copy_curriculum_steps`
    /// and `copy_windows`), inputs and next-token targets, (batch, context) each; the curriculum's
    /// windows have `copy_context` tokens when that is set.
    pub fn sample(&mut self, step: usize, tokens: &[u32]) -> Result<(Tensor, Tensor)> {
        let curriculum = step < self.curriculum_steps;
        let t =
            if curriculum { self.cfg.copy_context.unwrap_or(self.cfg.context_tokens) } else { self.cfg.context_tokens };
        let (mut x, mut y) = (Vec::with_capacity(self.cfg.batch * t), Vec::with_capacity(self.cfg.batch * t));
        for _ in 0..self.cfg.batch {
            // Drawn only when asked for, so runs without copy windows replay earlier runs exactly.
            let copy = curriculum || (self.cfg.copy_windows > 0.0 && self.rng.uniform() < self.cfg.copy_windows);
            if copy {
                let w = repeated_window(t, self.cfg.copy_segments, self.cfg.model.vocab_size, &mut self.rng);
                x.extend_from_slice(&w[..t]);
                y.extend_from_slice(&w[1..]);
                continue;
            }
            let o = self.rng.below(tokens.len() - t - 1);
            let mut w = tokens[o..o + t + 1].to_vec();
            if self.cfg.repeat_share > 0.0 && self.rng.uniform() < self.cfg.repeat_share {
                // Drawn only when asked for, so runs without random spans replay earlier runs exactly.
                let random = self.cfg.repeat_random > 0.0 && self.rng.uniform() < self.cfg.repeat_random;
                repeat_a_span(&mut w, random.then_some(self.cfg.model.vocab_size), &mut self.rng);
            }
            x.extend_from_slice(&w[..t]);
            y.extend_from_slice(&w[1..]);
        }
        let shape = (self.cfg.batch, t);
        Ok((Tensor::from_vec(x, shape, &self.device)?, Tensor::from_vec(y, shape, &self.device)?))
    }

    /// One optimiser step on (inputs, targets); returns the loss before the step.
    pub fn step(&mut self, step: usize, inputs: &Tensor, targets: &Tensor) -> Result<f64> {
        let out = model::forward(&self.cfg.model, &self.weights, inputs, false)?;
        let loss = model::loss(&out.logits, targets)?;
        let mut grads = loss.backward()?;
        clip(&mut grads, self.weights.vars.values(), self.cfg.grad_clip)?;
        let lr = self.cfg.lr_at(step);
        self.decay.set_learning_rate(lr);
        self.no_decay.set_learning_rate(lr);
        self.decay.step(&grads)?;
        self.no_decay.step(&grads)?;
        loss.to_scalar::<f32>().map(f64::from)
    }

    /// Mean loss over `eval_windows` evenly spaced windows of `tokens` (the same windows every time).
    pub fn evaluate(&self, tokens: &[u32]) -> Result<f64> {
        let t = self.cfg.context_tokens;
        let n = self.cfg.eval_windows;
        let span = tokens.len() - t - 1;
        let offsets: Vec<usize> = (0..n).map(|i| i * span / n).collect();
        mean_loss(&self.cfg.model, &self.weights, tokens, &offsets, t, self.cfg.batch)
    }

    /// The whole run, writing `loss.csv` into `out_dir` and printing progress.
    /// A resumed run appends to its logs from where its state was saved.
    pub fn run(&mut self, train: &[u32], heldout: &[u32], out_dir: &Path) -> std::io::Result<Summary> {
        let io = |e: candle_core::Error| std::io::Error::other(e.to_string());
        let before = self.done;
        let mut csv =
            open_log(&out_dir.join("loss.csv"), before.steps, "step,tokens,lr,train_loss,heldout_loss,elapsed_secs")?;
        // A run with copy windows also follows their effect: `copy.csv`, the control's probe.
        let mut copy_csv = None;
        if self.cfg.copy_curriculum_steps > 0 || self.cfg.copy_windows > 0.0 {
            copy_csv = Some(open_log(&out_dir.join("copy.csv"), before.steps, &format!("step,{PROBE_COLUMNS}"))?);
        }
        let start = Instant::now();
        let (mut window_loss, mut window_steps) = (0.0, 0usize);
        let mut summary = Summary {
            steps_done: before.steps,
            tokens_seen: before.tokens,
            wall_secs: 0.0,
            tokens_per_sec: 0.0,
            final_train_loss: f64::NAN,
            final_heldout_loss: None,
            curriculum_steps: 0,
        };
        for step in before.steps..self.cfg.steps {
            let (x, y) = self.sample(step, train).map_err(io)?;
            summary.tokens_seen += x.elem_count();
            let loss = self.step(step, &x, &y).map_err(io)?;
            window_loss += loss;
            window_steps += 1;
            let this_call = start.elapsed().as_secs_f64();
            let secs = before.secs + this_call;
            let out_of_time = self.cfg.max_secs.is_some_and(|m| this_call >= m);
            // The run's own evaluations; one more when time runs out, logged but neither ending the
            // curriculum nor saved, so a run resumed from its state replays the run made in one go.
            let scheduled = (step + 1).is_multiple_of(self.cfg.eval_every) || step + 1 == self.cfg.steps;
            if scheduled || out_of_time {
                let heldout = self.evaluate(heldout).map_err(io)?;
                let train_loss = window_loss / window_steps as f64;
                let tokens = summary.tokens_seen;
                writeln!(
                    csv,
                    "{},{},{:.6e},{:.4},{:.4},{:.1}",
                    step + 1,
                    tokens,
                    self.cfg.lr_at(step),
                    train_loss,
                    heldout,
                    secs
                )?;
                csv.flush()?;
                println!(
                    "step {:>6}  train {train_loss:.4}  held-out {heldout:.4}  {:.0} tokens/s  {secs:.0} s",
                    step + 1,
                    tokens as f64 / secs
                );
                if let Some(f) = &mut copy_csv {
                    let probe =
                        Probe::new(&self.cfg.model, &self.weights).map_err(|e| std::io::Error::other(e.to_string()))?;
                    writeln!(f, "{},{}", step + 1, probe.csv_columns())?;
                    f.flush()?;
                    println!("             {}", probe.describe());
                    let met = self.cfg.copy_until_induction.is_some_and(|x| probe.best_induction().0 >= x);
                    if met && scheduled && step + 1 < self.curriculum_steps {
                        println!("             induction reached: text from step {} on", step + 2);
                        self.curriculum_steps = step + 1;
                    }
                }
                summary.final_train_loss = train_loss;
                summary.final_heldout_loss = Some(heldout);
                (window_loss, window_steps) = (0.0, 0);
                if let (Some(dir), true) = (&self.state_dir, scheduled) {
                    self.save_state(dir, Done { steps: step + 1, tokens, secs })?;
                }
            }
            summary.steps_done = step + 1;
            if out_of_time {
                break;
            }
        }
        summary.curriculum_steps = self.curriculum_steps.min(summary.steps_done);
        summary.wall_secs = before.secs + start.elapsed().as_secs_f64();
        summary.tokens_per_sec = summary.tokens_seen as f64 / summary.wall_secs;
        Ok(summary)
    }
}

/// A log that a new run starts with `header`; a run resumed after `steps_done` steps keeps the rows up
/// to there (those past it were written after the state it resumes from) and appends.
fn open_log(path: &Path, steps_done: usize, header: &str) -> std::io::Result<std::fs::File> {
    if steps_done == 0 {
        let mut f = std::fs::File::create(path)?;
        writeln!(f, "{header}")?;
        return Ok(f);
    }
    let text = std::fs::read_to_string(path)?;
    let kept: Vec<&str> = text
        .lines()
        .enumerate()
        .filter(|(i, line)| {
            *i == 0 || line.split(',').next().and_then(|s| s.parse::<usize>().ok()).is_some_and(|s| s <= steps_done)
        })
        .map(|(_, line)| line)
        .collect();
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, kept.join("\n") + "\n")?;
    std::fs::rename(&tmp, path)?;
    std::fs::OpenOptions::new().append(true).open(path)
}

/// Mean next-token loss of the `t`-token windows of `tokens` starting at `offsets`, `batch` at a time.
pub fn mean_loss(
    cfg: &ModelConfig,
    w: &Weights,
    tokens: &[u32],
    offsets: &[usize],
    t: usize,
    batch: usize,
) -> Result<f64> {
    let mut total = 0.0;
    for chunk in offsets.chunks(batch) {
        let (x, y) = windows(tokens, chunk, t, &Device::Cpu)?;
        let out = model::forward(cfg, w, &x, false)?;
        total += f64::from(model::loss(&out.logits, &y)?.to_scalar::<f32>()?) * chunk.len() as f64;
    }
    Ok(total / offsets.len() as f64)
}

fn windows(tokens: &[u32], offsets: &[usize], t: usize, device: &Device) -> Result<(Tensor, Tensor)> {
    let x: Vec<u32> = offsets.iter().flat_map(|&o| tokens[o..o + t].iter().copied()).collect();
    let y: Vec<u32> = offsets.iter().flat_map(|&o| tokens[o + 1..o + t + 1].iter().copied()).collect();
    Ok((Tensor::from_vec(x, (offsets.len(), t), device)?, Tensor::from_vec(y, (offsets.len(), t), device)?))
}

/// Copies a span of `w` (8 tokens up to a quarter of the window) to a later, non-overlapping place in
/// the same window, overwriting what was there; with `random_vocab`, the span is first filled with
/// random ids from `1..random_vocab`. From the copy's second token on, the next token is predictable
/// by finding the previous occurrence of the current one: the induction pattern.
pub fn repeat_a_span(w: &mut [u32], random_vocab: Option<usize>, rng: &mut Rng) {
    let longest = w.len() / 4;
    if longest < 8 {
        return;
    }
    let len = 8 + rng.below(longest - 8 + 1);
    let from = rng.below(w.len() - 2 * len + 1);
    let to = from + len + rng.below(w.len() - from - 2 * len + 1);
    if let Some(vocab) = random_vocab {
        w[from..from + len].iter_mut().for_each(|id| *id = 1 + rng.below(vocab - 1) as u32);
    }
    w.copy_within(from..from + len, to);
}

/// Scales all gradients down together when their global L2 norm exceeds `max_norm`.
fn clip<'a>(grads: &mut GradStore, vars: impl Iterator<Item = &'a Var> + Clone, max_norm: f64) -> Result<()> {
    let mut sum = 0.0f64;
    for v in vars.clone() {
        if let Some(g) = grads.get(v) {
            sum += f64::from(g.sqr()?.sum_all()?.to_scalar::<f32>()?);
        }
    }
    let norm = sum.sqrt();
    if norm > max_norm {
        let scale = max_norm / norm;
        for v in vars {
            if let Some(g) = grads.get(v) {
                let scaled = (g * scale)?;
                grads.insert(v, scaled);
            }
        }
    }
    Ok(())
}

/// Seconds spent in forward, loss, backward and optimiser over `steps` steps on one batch: where a
/// step's time goes (`train --profile N`).
pub fn profile(trainer: &mut Trainer, tokens: &[u32], steps: usize) -> Result<[f64; 4]> {
    let mut secs = [0.0; 4];
    let (x, y) = trainer.sample(0, tokens)?;
    for step in 0..steps {
        let t0 = Instant::now();
        let out = model::forward(&trainer.cfg.model, &trainer.weights, &x, false)?;
        let t1 = Instant::now();
        let loss = model::loss(&out.logits, &y)?;
        let t2 = Instant::now();
        let mut grads = loss.backward()?;
        let t3 = Instant::now();
        clip(&mut grads, trainer.weights.vars.values(), trainer.cfg.grad_clip)?;
        trainer.decay.set_learning_rate(trainer.cfg.lr_at(step));
        trainer.no_decay.set_learning_rate(trainer.cfg.lr_at(step));
        trainer.decay.step(&grads)?;
        trainer.no_decay.step(&grads)?;
        let t4 = Instant::now();
        for (s, (a, b)) in secs.iter_mut().zip([(t0, t1), (t1, t2), (t2, t3), (t3, t4)]) {
            *s += (b - a).as_secs_f64();
        }
    }
    Ok(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> TrainConfig {
        TrainConfig {
            seed: 7,
            steps: 20,
            batch: 4,
            context_tokens: 16,
            peak_lr: 1e-2,
            final_lr_ratio: 0.1,
            warmup_steps: 2,
            weight_decay: 0.1,
            grad_clip: 1.0,
            eval_every: 10,
            eval_windows: 4,
            repeat_share: 0.0,
            repeat_random: 0.0,
            copy_curriculum_steps: 0,
            copy_windows: 0.0,
            copy_segments: Segments::default(),
            copy_context: None,
            copy_until_induction: None,
            max_secs: None,
            model: ModelConfig {
                vocab_size: 32,
                hidden_size: 32,
                layers: 4,
                query_heads: 4,
                kv_heads: 2,
                head_dim: 8,
                intermediate_size: 64,
                sliding_window: 4,
                global_every: 4,
                rope_theta: 10000.0,
                rms_norm_eps: 1e-6,
                max_position_embeddings: 64,
                mla: None,
            },
        }
    }

    #[test]
    fn training_steps_reduce_the_loss_on_a_fixed_batch() {
        let mut trainer = Trainer::new(config(), Device::Cpu).unwrap();
        let tokens: Vec<u32> = (0..200u32).map(|i| (i * 7 + i / 5) % 32).collect();
        let (x, y) = trainer.sample(0, &tokens).unwrap();
        let first = trainer.step(0, &x, &y).unwrap();
        let mut last = first;
        for s in 1..10 {
            last = trainer.step(s, &x, &y).unwrap();
        }
        assert!(first > 3.0, "starts near ln 32 = 3.47: {first}");
        assert!(last < first - 0.5, "loss {first} -> {last}");
    }

    #[test]
    fn learning_rate_warms_up_then_decays_to_the_floor() {
        let c = config();
        assert!((c.lr_at(0) - 5e-3).abs() < 1e-12);
        assert!((c.lr_at(1) - 1e-2).abs() < 1e-12);
        assert!(c.lr_at(10) < c.lr_at(5));
        assert!((c.lr_at(20) - 1e-3).abs() < 1e-9);
    }

    #[test]
    fn a_repeated_span_is_copied_later_in_the_window_without_overlap() {
        let mut rng = Rng::new(3);
        for n in [32usize, 33, 129, 200] {
            for _ in 0..500 {
                let original: Vec<u32> = (0..n as u32).collect();
                let mut w = original.clone();
                repeat_a_span(&mut w, None, &mut rng);
                let changed: Vec<usize> = (0..n).filter(|&i| w[i] != original[i]).collect();
                let (to, len) = (changed[0], changed.len());
                assert!((8..=n / 4).contains(&len), "{len} of {n}");
                assert_eq!(changed, (to..to + len).collect::<Vec<_>>(), "one contiguous span");
                let from = w[to] as usize;
                assert!(from + len <= to, "source {from}+{len} ends before the copy at {to}");
                assert_eq!(&w[to..to + len], &original[from..from + len]);
            }
        }
        let mut short: Vec<u32> = (0..31).collect();
        repeat_a_span(&mut short, Some(50), &mut rng);
        assert_eq!(short, (0..31).collect::<Vec<_>>(), "too short for an 8-token span: unchanged");
        // Random spans: a window of zeros gets a span of ids in 1..50 and its copy, nothing else.
        for _ in 0..200 {
            let mut w = vec![0u32; 64];
            repeat_a_span(&mut w, Some(50), &mut rng);
            let set: Vec<usize> = (0..64).filter(|&i| w[i] != 0).collect();
            assert!(w.iter().all(|&id| id < 50));
            let len = set.len() / 2;
            assert!(set.len().is_multiple_of(2) && (8..=16).contains(&len), "{set:?}");
            let values: Vec<u32> = set.iter().map(|&i| w[i]).collect();
            assert_eq!(values[..len], values[len..], "the span and its copy");
        }
    }

    #[test]
    fn the_copy_curriculum_comes_first_then_copy_windows_mix_with_text() {
        let mut cfg = config();
        (cfg.copy_curriculum_steps, cfg.copy_windows, cfg.batch) = (3, 0.5, 64);
        cfg.copy_segments = Segments { min_len: 4, max_len: 7 };
        let mut trainer = Trainer::new(cfg, Device::Cpu).unwrap();
        // Text of ids 1..=31 counting up, so a window of it never starts with <|endoftext|> (0).
        let tokens: Vec<u32> = (0..500u32).map(|i| 1 + i % 31).collect();
        let copy_rows = |trainer: &mut Trainer, step: usize| {
            let (x, y) = trainer.sample(step, &tokens).unwrap();
            let (x, y) = (x.to_vec2::<u32>().unwrap(), y.to_vec2::<u32>().unwrap());
            for (xr, yr) in x.iter().zip(&y) {
                assert_eq!(xr[1..], yr[..15], "targets are the inputs shifted by one");
                let text = xr.windows(2).all(|p| p[1] == 1 + p[0] % 31);
                assert!(text || (xr[0] == 0 && (4..=7).any(|n| xr[1..1 + n] == xr[1 + n..1 + 2 * n])), "{xr:?}");
            }
            x.iter().filter(|r| r[0] == 0).count()
        };
        for step in 0..3 {
            assert_eq!(copy_rows(&mut trainer, step), 64, "the curriculum is copy windows only");
        }
        let mixed = copy_rows(&mut trainer, 3);
        assert!((16..=48).contains(&mixed), "about half of 64 after the curriculum: {mixed}");
    }

    #[test]
    fn curriculum_windows_have_the_copy_context_and_later_windows_the_full_one() {
        let mut cfg = config();
        (cfg.copy_curriculum_steps, cfg.copy_context, cfg.copy_windows) = (2, Some(9), 0.5);
        cfg.copy_segments = Segments { min_len: 2, max_len: 4 };
        let mut trainer = Trainer::new(cfg, Device::Cpu).unwrap();
        let tokens: Vec<u32> = (0..500u32).map(|i| 1 + i % 31).collect();
        for step in 0..2 {
            let (x, y) = trainer.sample(step, &tokens).unwrap();
            assert_eq!((x.dims(), y.dims()), (&[4usize, 9][..], &[4usize, 9][..]), "step {step}");
            let x = x.to_vec2::<u32>().unwrap();
            assert!(x.iter().all(|r| r[0] == 0 && (2..=4).any(|n| r[1..1 + n] == r[1 + n..1 + 2 * n])), "{x:?}");
        }
        assert_eq!(trainer.sample(2, &tokens).unwrap().0.dims(), [4, 16], "after the curriculum");
    }

    /// A run of 6 steps evaluated every 2, with a curriculum of 9-token windows asked for all 6.
    fn curriculum_run(until: Option<f64>) -> Summary {
        let mut cfg = config();
        cfg.model.vocab_size = 64;
        (cfg.steps, cfg.eval_every, cfg.copy_curriculum_steps, cfg.copy_context) = (6, 2, 6, Some(9));
        (cfg.copy_segments, cfg.copy_until_induction) = (Segments { min_len: 2, max_len: 4 }, until);
        let dir = std::env::temp_dir().join(format!("attention-lab-train-until-{}-{until:?}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tokens: Vec<u32> = (0..500u32).map(|i| 1 + i % 63).collect();
        let summary = Trainer::new(cfg, Device::Cpu).unwrap().run(&tokens, &tokens, &dir).unwrap();
        let copy_rows = std::fs::read_to_string(dir.join("copy.csv")).unwrap().lines().count();
        assert_eq!(copy_rows, 1 + 3, "a header and a probe at steps 2, 4 and 6");
        std::fs::remove_dir_all(&dir).unwrap();
        summary
    }

    #[test]
    fn the_curriculum_ends_at_the_first_evaluation_that_reaches_the_induction_score_asked_for() {
        // Every score reaches 0: text from step 3 on. 4 windows a step: 2 steps of 9 tokens, 4 of 16.
        let met = curriculum_run(Some(0.0));
        assert_eq!((met.curriculum_steps, met.tokens_seen), (2, 4 * (2 * 9 + 4 * 16)));
        // No attention probability exceeds 1: the whole run is curriculum.
        for unmet in [curriculum_run(Some(1.1)), curriculum_run(None)] {
            assert_eq!((unmet.curriculum_steps, unmet.tokens_seen), (6, 4 * 6 * 9));
        }
    }

    #[test]
    fn same_seed_same_weights() {
        let a = Trainer::new(config(), Device::Cpu).unwrap();
        let b = Trainer::new(config(), Device::Cpu).unwrap();
        let w =
            |t: &Trainer| t.weights.get("model.layers.0.self_attn.q_proj.weight").unwrap().to_vec2::<f32>().unwrap();
        assert_eq!(w(&a), w(&b));
    }

    #[test]
    fn a_run_from_a_checkpoint_starts_on_its_float16_weights_and_refuses_another_layout() {
        let dir = std::env::temp_dir().join(format!("attention-lab-train-init-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = config();
        let exported = Trainer::new(TrainConfig { seed: 3, ..cfg.clone() }, Device::Cpu).unwrap();
        crate::export::save(&dir, &cfg.model, &exported.weights, 0).unwrap();
        let started = Trainer::from_checkpoint(cfg.clone(), Device::Cpu, &dir).unwrap();
        let (_, on_disk) = crate::checkpoint::load(&dir).unwrap();
        let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for (name, w) in &on_disk.vars {
            assert_eq!(flat(w.as_tensor()), flat(started.weights.get(name).unwrap()), "{name}");
        }
        let fresh = Trainer::new(cfg.clone(), Device::Cpu).unwrap();
        let q = "model.layers.0.self_attn.q_proj.weight";
        assert_ne!(flat(fresh.weights.get(q).unwrap()), flat(started.weights.get(q).unwrap()));
        let wider = ModelConfig { intermediate_size: 96, ..cfg.model };
        let refused = Trainer::from_checkpoint(TrainConfig { model: wider, ..cfg }, Device::Cpu, &dir);
        assert!(refused.is_err_and(|e| e.to_string().contains("layout")));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_run_stopped_and_resumed_ends_on_the_weights_of_one_uninterrupted_run() {
        let dir = std::env::temp_dir().join(format!("attention-lab-train-resume-{}", std::process::id()));
        let (whole, parts, state) = (dir.join("whole"), dir.join("parts"), dir.join("parts/resume"));
        for d in [&whole, &parts] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut cfg = config();
        (cfg.steps, cfg.eval_every, cfg.eval_windows, cfg.copy_curriculum_steps) = (4, 1, 2, 2);
        cfg.copy_segments = Segments { min_len: 4, max_len: 7 };
        let tokens: Vec<u32> = (0..300u32).map(|i| (i * 7 + i / 5) % 32).collect();
        let mut a = Trainer::new(cfg.clone(), Device::Cpu).unwrap();
        a.run(&tokens, &tokens, &whole).unwrap();
        // A time limit of 0 s stops the first call after one step (an evaluation: the state is saved).
        let mut b = Trainer::new(TrainConfig { max_secs: Some(0.0), ..cfg.clone() }, Device::Cpu).unwrap();
        b.state_dir = Some(state.clone());
        assert_eq!(b.run(&tokens, &tokens, &parts).unwrap().steps_done, 1);
        let mut c = Trainer::resume(cfg.clone(), Device::Cpu, &state).unwrap();
        let summary = c.run(&tokens, &tokens, &parts).unwrap();
        assert_eq!((summary.steps_done, summary.tokens_seen), (4, 4 * cfg.batch * 16));
        for (name, w) in &a.weights.vars {
            let flat = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            assert_eq!(flat(w.as_tensor()), flat(c.weights.get(name).unwrap()), "{name}");
        }
        let steps: Vec<String> = std::fs::read_to_string(parts.join("loss.csv"))
            .unwrap()
            .lines()
            .map(|l| l.split(',').next().unwrap().to_string())
            .collect();
        assert_eq!(steps, ["step", "1", "2", "3", "4"], "one header, the first call's row, then the rest");
        let other = TrainConfig { seed: 8, ..cfg.clone() };
        assert!(Trainer::resume(other, Device::Cpu, &state).is_err(), "another recipe is refused");
        // Stopped by time between two evaluations: its extra row is logged, its state is not saved.
        let (off, off_state) = (dir.join("off"), dir.join("off/resume"));
        std::fs::create_dir_all(&off).unwrap();
        let mut d = Trainer::new(TrainConfig { eval_every: 2, max_secs: Some(0.0), ..cfg }, Device::Cpu).unwrap();
        d.state_dir = Some(off_state.clone());
        assert_eq!(d.run(&tokens, &tokens, &off).unwrap().steps_done, 1);
        assert!(!off_state.join(STATE_BOOKS).exists(), "no state saved off the evaluations");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
