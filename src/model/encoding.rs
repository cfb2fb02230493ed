//! The compact, URL-safe form of a model (`cfg=` in the URL), readable at a glance:
//! `L32.d4096.h32.kv8.hd128.fs14336.v128256.rope500000.ctx8192`.
//!
//! Tokens are separated by `.`; each is a lowercase name followed by its value (only `L`, the layer
//! count, is upper case so it cannot be mistaken for a 1). Every character is in the URL-unreserved
//! set `[A-Za-z0-9.-]`. Required: `L`, `d`, `h`. The others, in the order the encoder writes them:
//!
//! | token | meaning | default |
//! |---|---|---|
//! | `kv8` `hd128` `keqv` | KV heads, head dim, K=V | `h`, `d / h`, off |
//! | `gkv1` `ghd512` `gkeqv` | global layers' geometry (any of them sets it) | as above |
//! | `mla512-64-1536-128-128` | kv rank, rope dim, q rank (0: none), nope dim, v dim | none |
//! | `idx128` `idx128-4-3` | with `mla`: the lightning indexer's key width (DeepSeek V3.2), cached beside the latent; with a step and offset, only in the layers that run the indexer (GLM-5.2: layer `i` when `max(i + 1 - 3, 0)` is a multiple of 4) | none |
//! | `pat5w1024-1g` | repeating unit of runs: `g` global, `w<W>` sliding, `c<C>` chunked; without attention: `s` state-space, `l` linear attention, `v` short convolution, `f` feed-forward only | all global |
//! | `ssm20480-81920-2-2-1000` `lin...` `cnv...` | a recurrent mixer's state: conv elements, state elements, their bytes per element, mixer parameters per layer | none |
//! | `bas` `bal` `bav` | every attention layer also runs that recurrent mixer (Falcon-H1, Zamba's hybrid layers) | none |
//! | `xl18` / `xg2` | last N layers reuse caches / groups of N share | none |
//! | `fs14336` `fg` `fm` | FFN size: SwiGLU / GeGLU / plain MLP | `fs` and `4d` |
//! | `moe256-8-1-2048-3-1` | experts, active, shared, expert size, first dense layers, step | none |
//! | `v32000` `tie` | vocabulary, tied embeddings | 32000, untied |
//! | `rope10000p250hx8000` `sin` `learned1024` `nope` `alibi` | positions (`p`: rotary fraction in thousandths; `h`: proportional, over the whole head; `x`: linear scaling factor in thousandths; `alibi`: ALiBi's distance bias on the scores) | `rope10000` |
//! | `grope1000000p250` `gnope` `galibi` | global layers' positions | as above |
//! | `bqkv` `bo` `bffn` `ln` `lnw` `lnn` `np4` `qkn` `qknf` `sink` `ple256` `ctx4096` | biases, LayerNorm (`lnw`: scale only, no bias; `lnn`: no parameters), norms per layer, QK-norm (`qknf`: over the whole projection), attention sinks, per-layer inputs, max positions | off, RMSNorm, 2, off, off, off, 0, 4096 |
//!
//! RoPE theta is written as an integer (rounded into `1..=10^18`), the rotary fraction and the
//! scaling factor in thousandths (at least 1); every other field round-trips exactly.

use std::fmt;

use super::config::{AttnGeometry, CrossLayerSharing, FfnKind, Mla, Model, Moe, NormKind, Positional, StateGeometry};
use super::schedule::{LayerKind, Schedule, StateMixer};

/// Longest accepted text; anything longer is rejected before parsing.
pub const MAX_ENCODED_LEN: usize = 2048;

/// Why a `cfg=` string could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EncodingError {
    TooLong(usize),
    Empty,
    UnknownToken(String),
    BadValue(String),
    Duplicate(String),
    Missing(&'static str),
    Invalid(String),
}

impl fmt::Display for EncodingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodingError::TooLong(n) => write!(f, "model code is {n} characters long (at most {MAX_ENCODED_LEN})"),
            EncodingError::Empty => f.write_str("model code is empty"),
            EncodingError::UnknownToken(t) => write!(f, "unknown part {t:?} in the model code"),
            EncodingError::BadValue(t) => write!(f, "bad value in {t:?}"),
            EncodingError::Duplicate(t) => write!(f, "{t:?} appears twice"),
            EncodingError::Missing(t) => write!(f, "the model code needs {t}"),
            EncodingError::Invalid(why) => write!(f, "invalid model: {why}"),
        }
    }
}

impl std::error::Error for EncodingError {}

/// Largest RoPE theta a code carries (written as an integer; imported configs may say more).
pub const MAX_CODE_THETA: u64 = 1_000_000_000_000_000_000;

/// `v` rounded into `min..=max` (NaN: `fallback`). The decoder refuses zero fractions, factors and
/// thetas, so a valid model whose value rounds to 0 (an imported rotary fraction of 0.0001) is written
/// as the smallest value a code can hold rather than as a code that no longer reads back.
fn clamped(v: f64, min: u64, max: u64, fallback: u64) -> u64 {
    if v.is_nan() {
        return fallback;
    }
    // Clamped to a range of integers below 2^63 first, so `as` cannot truncate.
    v.round().clamp(min as f64, max as f64) as u64
}

/// The rotary fraction in thousandths, in `1..=1000`.
fn permille(f: f64) -> u64 {
    clamped(f * 1000.0, 1, 1000, 1000)
}

/// A RoPE scaling factor in thousandths (1000: none).
fn thousandths(f: f64) -> u64 {
    clamped(f * 1000.0, 1, super::config::bounds::MAX_ROPE_FACTOR as u64 * 1000, 1000)
}

fn theta_int(t: f64) -> u64 {
    clamped(t, 1, MAX_CODE_THETA, 10_000)
}

fn positional_token(prefix: &str, p: Positional) -> String {
    match p {
        Positional::Rope { theta, partial_rotary_factor, proportional, linear_factor } => {
            let mut token = format!("{prefix}rope{}", theta_int(theta));
            let pm = permille(partial_rotary_factor);
            if pm != 1000 {
                token.push_str(&format!("p{pm}"));
            }
            if proportional {
                token.push('h');
            }
            let factor = thousandths(linear_factor);
            if factor != 1000 {
                token.push_str(&format!("x{factor}"));
            }
            token
        }
        Positional::Sinusoidal => format!("{prefix}sin"),
        Positional::Learned { max_positions } => format!("{prefix}learned{max_positions}"),
        Positional::NoPe => format!("{prefix}nope"),
        Positional::Alibi => format!("{prefix}alibi"),
    }
}

fn kind_token(k: LayerKind) -> String {
    match k {
        LayerKind::Global => "g".into(),
        LayerKind::Sliding { window_tokens } => format!("w{window_tokens}"),
        LayerKind::Chunked { chunk_tokens } => format!("c{chunk_tokens}"),
        LayerKind::Stateful(mixer) => mixer_letter(mixer).into(),
        LayerKind::FeedForward => "f".into(),
    }
}

/// A recurrent mixer's letter in `pat` runs and in `ba` (beside attention).
const fn mixer_letter(mixer: StateMixer) -> &'static str {
    match mixer {
        StateMixer::Ssm => "s",
        StateMixer::Linear => "l",
        StateMixer::Conv => "v",
    }
}

fn parse_mixer(token: &str, letter: &str) -> Result<StateMixer, EncodingError> {
    StateMixer::ALL
        .into_iter()
        .find(|&m| mixer_letter(m) == letter)
        .ok_or_else(|| EncodingError::BadValue(token.into()))
}

/// The name of the token that carries a recurrent mixer's state geometry.
const fn state_token(mixer: StateMixer) -> &'static str {
    match mixer {
        StateMixer::Ssm => "ssm",
        StateMixer::Linear => "lin",
        StateMixer::Conv => "cnv",
    }
}

/// The compact form of `model` (its id and name are not part of it).
pub fn encode_model(model: &Model) -> String {
    let mut t: Vec<String> =
        vec![format!("L{}", model.n_layers()), format!("d{}", model.d_model), format!("h{}", model.n_q_heads)];
    t.push(format!("kv{}", model.attn.n_kv_heads));
    t.push(format!("hd{}", model.attn.head_dim));
    if model.attn.k_eq_v {
        t.push("keqv".into());
    }
    if let Some(g) = model.global_attn {
        t.push(format!("gkv{}", g.n_kv_heads));
        t.push(format!("ghd{}", g.head_dim));
        if g.k_eq_v {
            t.push("gkeqv".into());
        }
    }
    if let Some(m) = model.mla {
        t.push(format!(
            "mla{}-{}-{}-{}-{}",
            m.kv_lora_rank,
            m.qk_rope_head_dim,
            m.q_lora_rank.unwrap_or(0),
            m.qk_nope_head_dim,
            m.v_head_dim
        ));
        if let Some(i) = m.index_head_dim {
            // Only an indexer that skips layers (GLM-5.2) adds its step and offset.
            if m.indexer_in_some_layers() {
                t.push(format!("idx{i}-{}-{}", m.index_topk_freq, m.index_skip_topk_offset));
            } else {
                t.push(format!("idx{i}"));
            }
        }
    }
    if model.schedule.layers().iter().any(|k| !k.is_global()) {
        let runs: Vec<String> =
            model.schedule.unit_runs().iter().map(|&(c, k)| format!("{c}{}", kind_token(k))).collect();
        t.push(format!("pat{}", runs.join("-")));
    }
    if let Some(mixer) = model.states.beside_attention {
        t.push(format!("ba{}", mixer_letter(mixer)));
    }
    for mixer in StateMixer::ALL {
        if let Some(g) = model.states.of(mixer) {
            t.push(format!(
                "{}{}-{}-{}-{}-{}",
                state_token(mixer),
                g.conv_elements,
                g.state_elements,
                g.conv_bytes,
                g.state_bytes,
                g.params
            ));
        }
    }
    match model.cross_layer {
        CrossLayerSharing::None => {}
        CrossLayerSharing::ReuseLast { shared_layers } => t.push(format!("xl{shared_layers}")),
        CrossLayerSharing::Groups { group_size } => t.push(format!("xg{group_size}")),
    }
    let ffn = match model.ffn_kind {
        FfnKind::SwiGlu => "fs",
        FfnKind::GeGlu => "fg",
        FfnKind::Mlp => "fm",
    };
    t.push(format!("{ffn}{}", model.ffn_size));
    if let Some(m) = model.moe {
        t.push(format!(
            "moe{}-{}-{}-{}-{}-{}",
            m.n_routed_experts,
            m.n_active_experts,
            m.n_shared_experts,
            m.expert_ffn_size,
            m.first_dense_layers,
            m.layer_step
        ));
    }
    t.push(format!("v{}", model.vocab_size));
    if model.tie_embeddings {
        t.push("tie".into());
    }
    t.push(positional_token("", model.positional));
    if let Some(p) = model.global_positional {
        t.push(positional_token("g", p));
    }
    if model.biases.qkv {
        t.push("bqkv".into());
    }
    if model.biases.o {
        t.push("bo".into());
    }
    if model.biases.ffn {
        t.push("bffn".into());
    }
    match model.norm {
        NormKind::RmsNorm => {}
        NormKind::LayerNorm => t.push("ln".into()),
        NormKind::LayerNormNoBias => t.push("lnw".into()),
        NormKind::NonParametric => t.push("lnn".into()),
    }
    if model.norms_per_layer != 2 {
        t.push(format!("np{}", model.norms_per_layer));
    }
    if model.qk_norm {
        t.push("qkn".into());
    }
    if model.qk_norm_per_head {
        t.push("qknf".into());
    }
    if model.attn_sinks {
        t.push("sink".into());
    }
    if model.per_layer_input_dim != 0 {
        t.push(format!("ple{}", model.per_layer_input_dim));
    }
    t.push(format!("ctx{}", model.max_position_embeddings));
    t.join(".")
}

fn number<T: std::str::FromStr>(token: &str, s: &str) -> Result<T, EncodingError> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(EncodingError::BadValue(token.into()));
    }
    s.parse().map_err(|_| EncodingError::BadValue(token.into()))
}

fn numbers<const N: usize>(token: &str, s: &str) -> Result<[u64; N], EncodingError> {
    let parts: Vec<&str> = s.split('-').collect();
    if parts.len() != N {
        return Err(EncodingError::BadValue(token.into()));
    }
    let mut out = [0u64; N];
    for (o, p) in out.iter_mut().zip(parts) {
        *o = number(token, p)?;
    }
    Ok(out)
}

/// `idx<width>` (an indexer key in every layer) or `idx<width>-<step>-<offset>` (in the layers
/// transformers' `GlmMoeDsaConfig` rule picks); a step of 1 is written the short way only.
fn parse_indexer(token: &str, value: &str) -> Result<[u32; 3], EncodingError> {
    if !value.contains('-') {
        return Ok([small(token, number(token, value)?)?, 1, 0]);
    }
    let [dim, freq, offset] = numbers::<3>(token, value)?;
    if freq < 2 {
        return Err(EncodingError::BadValue(token.into()));
    }
    Ok([small(token, dim)?, small(token, freq)?, small(token, offset)?])
}

fn small(token: &str, v: u64) -> Result<u32, EncodingError> {
    u32::try_from(v).map_err(|_| EncodingError::BadValue(token.into()))
}

fn parse_positional(token: &str, rest_after_name: &str, name: &str) -> Result<Positional, EncodingError> {
    match name {
        "sin" if rest_after_name.is_empty() => Ok(Positional::Sinusoidal),
        "nope" if rest_after_name.is_empty() => Ok(Positional::NoPe),
        "alibi" if rest_after_name.is_empty() => Ok(Positional::Alibi),
        "learned" => Ok(Positional::Learned { max_positions: number(token, rest_after_name)? }),
        "rope" => parse_rope(token, rest_after_name),
        _ => Err(EncodingError::BadValue(token.into())),
    }
}

/// `<theta>[p<fraction in thousandths>][h][x<factor in thousandths>]`.
fn parse_rope(token: &str, value: &str) -> Result<Positional, EncodingError> {
    let bad = || EncodingError::BadValue(token.into());
    let (theta, rest) = value.split_at(value.bytes().take_while(u8::is_ascii_digit).count());
    let theta = number::<u64>(token, theta)?;
    let (pm, rest) = match rest.strip_prefix('p') {
        Some(r) => {
            let (digits, rest) = r.split_at(r.bytes().take_while(u8::is_ascii_digit).count());
            (number::<u64>(token, digits)?, rest)
        }
        None => (1000, rest),
    };
    let (proportional, rest) = match rest.strip_prefix('h') {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let factor = match rest.strip_prefix('x') {
        Some(digits) => number::<u64>(token, digits)?,
        None if rest.is_empty() => 1000,
        None => return Err(bad()),
    };
    // Above MAX_CODE_THETA the encoder would write another number: refused, so codes are fixed points.
    if theta == 0 || theta > MAX_CODE_THETA || pm == 0 || pm > 1000 || factor == 0 {
        return Err(bad());
    }
    // theta is written as an integer; f64 is what RoPE uses (exact below 2^53).
    Ok(Positional::Rope {
        theta: theta as f64,
        partial_rotary_factor: pm as f64 / 1000.0,
        proportional,
        linear_factor: factor as f64 / 1000.0,
    })
}

fn parse_runs(token: &str, s: &str) -> Result<Vec<(u32, LayerKind)>, EncodingError> {
    let mut out = Vec::new();
    for run in s.split('-') {
        let digits = run.bytes().take_while(u8::is_ascii_digit).count();
        let (count, kind) = run.split_at(digits);
        let count: u32 = number(token, count)?;
        let kind = match kind.split_at_checked(1) {
            Some(("g", "")) => LayerKind::Global,
            Some(("w", w)) => LayerKind::Sliding { window_tokens: number(token, w)? },
            Some(("c", c)) => LayerKind::Chunked { chunk_tokens: number(token, c)? },
            Some(("f", "")) => LayerKind::FeedForward,
            Some((letter, "")) => LayerKind::Stateful(parse_mixer(token, letter)?),
            _ => return Err(EncodingError::BadValue(token.into())),
        };
        if count == 0 || count > super::config::bounds::MAX_LAYERS {
            return Err(EncodingError::BadValue(token.into()));
        }
        out.push((count, kind));
    }
    Ok(out)
}

/// Read a compact form back into a validated model (id `"custom"`).
pub fn decode_model(text: &str) -> Result<Model, EncodingError> {
    if text.len() > MAX_ENCODED_LEN {
        return Err(EncodingError::TooLong(text.len()));
    }
    if text.is_empty() {
        return Err(EncodingError::Empty);
    }
    let mut seen: Vec<&str> = Vec::new();
    let (mut layers, mut d, mut h) = (None::<u32>, None::<u64>, None::<u32>);
    let (mut kv, mut hd, mut keqv) = (None::<u32>, None::<u32>, false);
    let (mut gkv, mut ghd, mut gkeqv, mut any_global) = (None::<u32>, None::<u32>, false, false);
    let mut m = Model::simple(1, 1, 1);
    let mut ffn_size = None::<u64>;
    let mut pattern: Option<Vec<(u32, LayerKind)>> = None;
    let mut positional = None;
    let mut index_dim = None::<[u32; 3]>;
    for token in text.split('.') {
        let name_len = token.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (name, value) = token.split_at(name_len);
        if seen.contains(&name) {
            return Err(EncodingError::Duplicate(token.chars().take(40).collect()));
        }
        seen.push(name);
        match name {
            "L" => layers = Some(number(token, value)?),
            "d" => d = Some(number(token, value)?),
            "h" => h = Some(number(token, value)?),
            "kv" => kv = Some(number(token, value)?),
            "hd" => hd = Some(number(token, value)?),
            "keqv" if value.is_empty() => keqv = true,
            "gkv" => (gkv, any_global) = (Some(number(token, value)?), true),
            "ghd" => (ghd, any_global) = (Some(number(token, value)?), true),
            "gkeqv" if value.is_empty() => (gkeqv, any_global) = (true, true),
            "mla" => {
                let [rank, rope, q, nope, v] = numbers::<5>(token, value)?;
                m.mla = Some(Mla {
                    kv_lora_rank: small(token, rank)?,
                    qk_rope_head_dim: small(token, rope)?,
                    q_lora_rank: if q == 0 { None } else { Some(small(token, q)?) },
                    qk_nope_head_dim: small(token, nope)?,
                    v_head_dim: small(token, v)?,
                    ..Mla::DEEPSEEK
                });
            }
            "idx" => index_dim = Some(parse_indexer(token, value)?),
            "pat" => pattern = Some(parse_runs(token, value)?),
            "bas" | "bal" | "bav" if value.is_empty() => {
                m.states.beside_attention = Some(parse_mixer(token, &name[2..])?)
            }
            "ssm" | "lin" | "cnv" => {
                let [conv, state, conv_bytes, state_bytes, params] = numbers::<5>(token, value)?;
                let mixer = StateMixer::ALL.into_iter().find(|&m| state_token(m) == name).unwrap_or(StateMixer::Ssm);
                m.states.set(
                    mixer,
                    Some(StateGeometry {
                        conv_elements: conv,
                        state_elements: state,
                        conv_bytes: small(token, conv_bytes)?,
                        state_bytes: small(token, state_bytes)?,
                        params,
                    }),
                );
            }
            "xl" => m.cross_layer = CrossLayerSharing::ReuseLast { shared_layers: number(token, value)? },
            "xg" => m.cross_layer = CrossLayerSharing::Groups { group_size: number(token, value)? },
            "fs" | "fg" | "fm" => {
                if seen.iter().filter(|s| matches!(**s, "fs" | "fg" | "fm")).count() > 1 {
                    return Err(EncodingError::Duplicate(token.chars().take(40).collect()));
                }
                m.ffn_kind = match name {
                    "fs" => FfnKind::SwiGlu,
                    "fg" => FfnKind::GeGlu,
                    _ => FfnKind::Mlp,
                };
                ffn_size = Some(number(token, value)?);
            }
            "moe" => {
                let [e, a, s, fe, first, step] = numbers::<6>(token, value)?;
                m.moe = Some(Moe {
                    n_routed_experts: small(token, e)?,
                    n_active_experts: small(token, a)?,
                    n_shared_experts: small(token, s)?,
                    expert_ffn_size: fe,
                    first_dense_layers: small(token, first)?,
                    layer_step: small(token, step)?,
                });
            }
            "v" => m.vocab_size = number(token, value)?,
            "tie" if value.is_empty() => m.tie_embeddings = true,
            "sin" | "nope" | "alibi" | "learned" | "rope" => {
                if positional.is_some() {
                    return Err(EncodingError::Duplicate(token.chars().take(40).collect()));
                }
                positional = Some(parse_positional(token, value, name)?);
            }
            "gnope" if value.is_empty() => m.global_positional = Some(Positional::NoPe),
            "galibi" if value.is_empty() => m.global_positional = Some(Positional::Alibi),
            "gsin" if value.is_empty() => m.global_positional = Some(Positional::Sinusoidal),
            "grope" => m.global_positional = Some(parse_positional(token, value, "rope")?),
            "bqkv" if value.is_empty() => m.biases.qkv = true,
            "bo" if value.is_empty() => m.biases.o = true,
            "bffn" if value.is_empty() => m.biases.ffn = true,
            "ln" if value.is_empty() => m.norm = NormKind::LayerNorm,
            "lnw" if value.is_empty() => m.norm = NormKind::LayerNormNoBias,
            "lnn" if value.is_empty() => m.norm = NormKind::NonParametric,
            "np" => m.norms_per_layer = number(token, value)?,
            "qkn" if value.is_empty() => m.qk_norm = true,
            "qknf" if value.is_empty() => m.qk_norm_per_head = true,
            "sink" if value.is_empty() => m.attn_sinks = true,
            "ple" => m.per_layer_input_dim = number(token, value)?,
            "ctx" => m.max_position_embeddings = number(token, value)?,
            _ => {
                return Err(EncodingError::UnknownToken(token.chars().take(40).collect()));
            }
        }
    }
    let layers = layers.ok_or(EncodingError::Missing("L (layers)"))?;
    let d = d.ok_or(EncodingError::Missing("d (model width)"))?;
    let h = h.ok_or(EncodingError::Missing("h (query heads)"))?;
    if layers == 0 || layers > super::config::bounds::MAX_LAYERS {
        return Err(EncodingError::Invalid(format!("{layers} layers")));
    }
    if h == 0 {
        return Err(EncodingError::Invalid("0 query heads".into()));
    }
    let head_dim = match hd {
        Some(v) => v,
        None if d % u64::from(h) == 0 => {
            u32::try_from(d / u64::from(h)).map_err(|_| EncodingError::Invalid("head dim too large".into()))?
        }
        None => {
            return Err(EncodingError::Invalid(format!("d = {d} is not a multiple of h = {h}; give hd")));
        }
    };
    m.d_model = d;
    m.n_q_heads = h;
    m.attn = AttnGeometry { n_kv_heads: kv.unwrap_or(h), head_dim, k_eq_v: keqv };
    if any_global {
        m.global_attn = Some(AttnGeometry {
            n_kv_heads: gkv.unwrap_or(m.attn.n_kv_heads),
            head_dim: ghd.unwrap_or(head_dim),
            k_eq_v: gkeqv,
        });
    }
    m.schedule = match pattern {
        Some(unit) => Schedule::periodic(layers, &unit),
        None => Schedule::uniform(layers, LayerKind::Global),
    };
    // `d` is any 20-digit number here (validate() bounds it next): no overflow on the way.
    m.ffn_size = ffn_size.unwrap_or(d.saturating_mul(4));
    if let Some(p) = positional {
        m.positional = p;
    }
    if let Some([dim, freq, offset]) = index_dim {
        let mla = m.mla.as_mut().ok_or_else(|| EncodingError::Invalid("idx (an indexer key) needs mla".into()))?;
        mla.index_head_dim = Some(dim);
        (mla.index_topk_freq, mla.index_skip_topk_offset) = (freq, offset);
    }
    m.id = "custom".into();
    m.name = "Custom model".into();
    m.validate().map_err(|e| EncodingError::Invalid(e.to_string()))?;
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::presets::all_presets;

    fn same_shape(a: &Model, b: &Model) -> bool {
        let mut b = b.clone();
        b.id.clone_from(&a.id);
        b.name.clone_from(&a.name);
        *a == b
    }

    #[test]
    fn every_preset_round_trips() {
        for p in all_presets() {
            let code = encode_model(&p.model);
            assert!(code.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'.' || c == b'-'), "{code}");
            let back = decode_model(&code).unwrap_or_else(|e| panic!("{}: {e} in {code}", p.id));
            assert!(same_shape(&p.model, &back), "{}: {code}", p.id);
            assert_eq!(encode_model(&back), code);
        }
    }

    #[test]
    fn readable_examples() {
        let m = crate::catalog::presets::preset("llama-3-8b").cloned().unwrap_or_else(|| Model::simple(1, 1, 1));
        assert_eq!(encode_model(&m), "L32.d4096.h32.kv8.hd128.fs14336.v128256.rope500000.ctx8192");
        let g = crate::catalog::presets::preset("gemma-3-27b").cloned().unwrap_or_else(|| Model::simple(1, 1, 1));
        assert!(encode_model(&g).contains(".pat5w1024-1g."));
        // Gemma 3's global layers scale positions by 8; Gemma 4's rotate a quarter, proportionally.
        assert!(encode_model(&g).ends_with(".rope10000.grope1000000x8000.np4.qkn.ctx131072"), "{}", encode_model(&g));
        let g4 = crate::catalog::presets::preset("gemma-4-12b").cloned().unwrap_or_else(|| Model::simple(1, 1, 1));
        assert!(encode_model(&g4).contains(".grope1000000p250h."), "{}", encode_model(&g4));
        let m = decode_model("L2.d64.h4.rope500p500hx2500").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            m.positional,
            Positional::Rope { theta: 500.0, partial_rotary_factor: 0.5, proportional: true, linear_factor: 2.5 }
        );
        for bad in ["L2.d64.h4.rope500h5", "L2.d64.h4.rope500x0", "L2.d64.h4.rope500xx", "L2.d64.h4.rope500hp5"] {
            assert!(decode_model(bad).is_err(), "{bad}");
        }
        // Minimal code: defaults fill the rest.
        let m = decode_model("L2.d64.h4").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((m.attn.n_kv_heads, m.attn.head_dim, m.ffn_size), (4, 16, 256));
    }

    #[test]
    fn the_lightning_indexer_round_trips_beside_mla_only() {
        let code = "L61.d7168.h128.kv128.hd128.mla512-64-1536-128-128.idx128";
        let m = decode_model(code).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.mla.and_then(|m| m.index_head_dim), Some(128));
        assert!(encode_model(&m).starts_with(code), "{}", encode_model(&m));
        assert!(decode_model("L2.d64.h4.idx128").is_err());
        assert!(decode_model("L2.d64.h4.mla8-4-0-8-8.idx0").is_err());
    }

    #[test]
    fn an_indexer_in_some_layers_round_trips_with_its_step_and_offset() {
        let code = "L78.d6144.h64.kv64.hd256.mla512-64-2048-192-256.idx128-4-3";
        let m = decode_model(code).unwrap_or_else(|e| panic!("{e}"));
        let mla = m.mla.unwrap_or_else(|| panic!("no mla"));
        assert_eq!((mla.index_head_dim, mla.index_topk_freq, mla.index_skip_topk_offset), (Some(128), 4, 3));
        // Layers 0, 1, 2, then every 4th from 6: 21 of 78 keep the key.
        assert_eq!((0..78).filter(|&l| mla.keeps_indexer_key(l)).count(), 21);
        assert!(encode_model(&m).starts_with(code), "{}", encode_model(&m));
        // A step of 1 has one spelling only; a step of 0 is no step.
        for bad in ["idx128-1-0", "idx128-0-3", "idx128-4", "idx128-4-3-1", "idx-4-3"] {
            assert!(decode_model(&format!("L78.d6144.h64.mla512-64-2048-192-256.{bad}")).is_err(), "{bad}");
        }
    }

    #[test]
    fn alibi_round_trips_in_both_slots() {
        let mut m = Model::simple(2, 64, 4);
        m.positional = Positional::Alibi;
        let code = encode_model(&m);
        assert_eq!(code, "L2.d64.h4.kv4.hd16.fs256.v32000.alibi.ctx4096");
        let back = decode_model(&code).unwrap_or_else(|e| panic!("{code}: {e}"));
        assert!(same_shape(&m, &back));
        assert_eq!(encode_model(&back), code);
        // Global layers with ALiBi beside RoPE elsewhere (no real model does; the code can say it).
        let mut g = Model::simple(6, 64, 4);
        g.schedule = Schedule::periodic(6, &[(2, LayerKind::Sliding { window_tokens: 128 }), (1, LayerKind::Global)]);
        g.global_positional = Some(Positional::Alibi);
        let code = encode_model(&g);
        assert!(code.contains(".rope10000.galibi."), "{code}");
        let back = decode_model(&code).unwrap_or_else(|e| panic!("{code}: {e}"));
        assert!(same_shape(&g, &back));
        assert_eq!(encode_model(&back), code);
        for bad in ["L2.d64.h4.alibi8", "L2.d64.h4.galibi1", "L2.d64.h4.alibi.nope", "L2.d64.h4.alibi.alibi"] {
            assert!(decode_model(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn norm_kinds_qk_norm_width_and_sinks_round_trip() {
        use super::super::params::model_params;
        for (norm, token) in
            [(NormKind::LayerNorm, ".ln."), (NormKind::LayerNormNoBias, ".lnw."), (NormKind::NonParametric, ".lnn.")]
        {
            let mut m = Model::simple(2, 64, 4);
            m.norm = norm;
            m.qk_norm = true;
            m.qk_norm_per_head = true;
            m.attn_sinks = true;
            let code = encode_model(&m);
            assert!(code.contains(token) && code.contains(".qkn.qknf.sink."), "{code}");
            let back = decode_model(&code).unwrap_or_else(|e| panic!("{code}: {e}"));
            assert!(same_shape(&m, &back), "{code}");
            assert_eq!(model_params(&back), model_params(&m), "{code}");
            assert_eq!(encode_model(&back), code);
        }
        for bad in ["L2.d64.h4.lnw1", "L2.d64.h4.sink2", "L2.d64.h4.qknf4", "L2.d64.h4.lnx"] {
            assert!(decode_model(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn recurrent_layers_and_their_states_round_trip() {
        // A Jamba-like unit: 4 Mamba layers, 1 attention layer, 3 Mamba layers.
        let ssm = LayerKind::Stateful(StateMixer::Ssm);
        let mut m = Model::simple(16, 64, 4);
        m.schedule = Schedule::periodic(16, &[(4, ssm), (1, LayerKind::Global), (3, ssm)]);
        m.states.ssm = Some(StateGeometry {
            conv_elements: 512,
            state_elements: 2048,
            conv_bytes: 2,
            state_bytes: 4,
            params: 12_345,
        });
        let code = encode_model(&m);
        assert!(code.contains(".pat4s-1g-3s.ssm512-2048-2-4-12345."), "{code}");
        let back = decode_model(&code).unwrap_or_else(|e| panic!("{code}: {e}"));
        assert!(same_shape(&m, &back));
        assert_eq!(encode_model(&back), code);
        // Every mixer letter, and feed-forward-only layers.
        let (lin, conv) = (LayerKind::Stateful(StateMixer::Linear), LayerKind::Stateful(StateMixer::Conv));
        let mut all = Model::simple(5, 64, 4);
        all.schedule = Schedule::from_layers(vec![lin, conv, LayerKind::FeedForward, LayerKind::Global, lin]);
        let g = StateGeometry { conv_elements: 0, state_elements: 7, conv_bytes: 1, state_bytes: 8, params: 0 };
        all.states.linear = Some(g);
        all.states.conv = Some(g);
        let code = encode_model(&all);
        assert!(code.contains(".pat1l-1v-1f-1g.lin0-7-1-8-0.cnv0-7-1-8-0."), "{code}");
        let back = decode_model(&code).unwrap_or_else(|e| panic!("{code}: {e}"));
        assert!(same_shape(&all, &back));
        // Falcon-H1: every layer runs attention and Mamba-2 side by side.
        let mut beside = Model::simple(4, 64, 4);
        beside.states.ssm = m.states.ssm;
        beside.states.beside_attention = Some(StateMixer::Ssm);
        let code = encode_model(&beside);
        assert!(code.contains(".kv4.hd16.bas.ssm512-2048-2-4-12345."), "{code}");
        let back = decode_model(&code).unwrap_or_else(|e| panic!("{code}: {e}"));
        assert!(same_shape(&beside, &back));
        // Layers without their state sizes, sizes without layers, and bad widths are refused.
        for bad in [
            "L4.d64.h4.pat1s-1g",
            "L4.d64.h4.ssm1-1-2-2-0",
            "L4.d64.h4.pat1s-1g.ssm1-1-0-2-0",
            "L4.d64.h4.pat1s-1g.ssm1-1-2-9-0",
            "L4.d64.h4.pat1s-1g.ssm1-1-2-2",
            "L4.d64.h4.pat1s-1g.ssm1-1-2-2-0.ssm1-1-2-2-0",
            "L4.d64.h4.pat1s2-1g.ssm1-1-2-2-0",
            "L4.d64.h4.bas",
            "L4.d64.h1.pat1s.ssm1-1-1-1-0.bas",
            "L4.d64.h4.bal.ssm1-1-2-2-0",
            "L4.d64.h4.bax.ssm1-1-2-2-0",
        ] {
            assert!(decode_model(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rope_values_outside_the_code_are_written_as_the_nearest_it_holds() {
        // Valid models (an imported config may say this), whose values round to 0 or pass the
        // largest theta: written as the nearest code value, and that code reads back.
        let mut m = Model::simple(2, 64, 4);
        m.positional =
            Positional::Rope { theta: 0.3, partial_rotary_factor: 0.0001, proportional: false, linear_factor: 0.0002 };
        assert_eq!(m.validate(), Ok(()));
        let code = encode_model(&m);
        assert!(code.contains(".rope1p1x1."), "{code}");
        let mut big = m.clone();
        big.positional = Positional::rope(1e300);
        let big_code = encode_model(&big);
        assert!(big_code.contains(".rope1000000000000000000."), "{big_code}");
        for c in [code, big_code] {
            let back = decode_model(&c).unwrap_or_else(|e| panic!("{c}: {e}"));
            assert_eq!(encode_model(&back), c);
        }
    }

    #[test]
    fn garbage_is_rejected() {
        let cases = [
            "",
            "L32",
            "d4096.h32",
            "L32.d4096.h32.kv5",
            "L32.d4096.h32.zz9",
            "L32.d4096.h32.L32",
            "L0.d4096.h32",
            "L32.d4096.h0",
            "L32.d4095.h32",
            "L32.d4096.h32.kv-8",
            "L32.d4096.h32.kv99999999999999999999999",
            "L32.d4096.h32.pat5x1024",
            "L32.d4096.h32.pat0g",
            "L32.d4096.h32.pat5w0-1g",
            "L32.d4096.h32.mla1-2-3",
            "L32.d4096.h32.rope0",
            "L32.d4096.h32.rope10000p2000",
            "L32.d4096.h32.rope10000.sin",
            "L32.d4096.h32.fs10.fm10",
            "L32.d4096.h32.xl32",
            "L32.d4096.h32.tie7",
            "L32..d4096.h32",
            "<script>",
            "L32.d4096.h32.moe8-9-0-100-0-1",
        ];
        for c in cases {
            assert!(decode_model(c).is_err(), "{c:?} should fail");
        }
        assert!(matches!(decode_model(&"L1.".repeat(1000)), Err(EncodingError::TooLong(_))));
        // Widths near u64::MAX: the default FFN size (4d) is refused, not overflowed.
        assert!(matches!(decode_model("L1.d18446744073709551615.h1.hd8"), Err(EncodingError::Invalid(_))));
        assert!(matches!(decode_model("L1.d4611686018427387904.h1.hd8"), Err(EncodingError::Invalid(_))));
        // A theta the encoder could not write back.
        assert!(decode_model("L1.d8.h1.rope1000000000000000000").is_ok());
        assert!(decode_model("L1.d8.h1.rope1000000000000000001").is_err());
        assert!(decode_model("L32.d4096.h32.zz9").err().is_some_and(|e| e.to_string().contains("zz9")));
    }
}
