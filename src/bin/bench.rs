//! Native kernel benchmark: `cargo run --release --bin bench -- --help` prints its flags (`USAGE`
//! below): the attention kernels' cases by default, `--lm` for the language model's rows (`matmul` at
//! the shipped model's shapes, 256 rows, and its whole forward pass, 256 tokens by default, every
//! layer's probabilities), `--paged` for decode over a paged cache.
//!
//! Each tiled row is followed by a `coop` row: the same case on the GPU's matrix units
//! (`flash_attention_coop.wgsl`, f16 inputs), or why this adapter has none.
//!
//! Prints a table (or one JSON object per line with `--json`). The case list, timing and statistics live
//! in `attention_lab::gpu::bench` (and `bench_lm`), shared with the browser's bench page.

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    if let Err(e) = native::run(std::env::args().skip(1)) {
        eprintln!("bench: {e}");
        std::process::exit(1);
    }
}

#[cfg(target_arch = "wasm32")]
fn main() {}

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::sync::OnceLock;
    use std::time::Instant;

    use attention_lab::gpu::bench::{self, BenchFilter, BenchResult, Repetitions};
    use attention_lab::gpu::bench_lm::{self, OpResult};
    use attention_lab::gpu::bench_packed;
    use attention_lab::gpu::bench_paged;
    use attention_lab::gpu::flash_tiles::FlashTiles;
    use attention_lab::gpu::matmul::{DirectBlock, MatmulForm};
    use attention_lab::gpu::{GpuContext, Kernels, LmWeights};
    use attention_lab::lm::checkpoint::Checkpoint;
    use attention_lab::model::Mask;
    use attention_lab::views::bench::paged::paged_summary;

    /// What `--help` prints: every flag.
    const USAGE: &str = "\
usage: bench [--n N] [--d D] [--mask full|causal|sliding|chunked] [--window W] [--chunk C]
             [--kernel tiled|coop|naive|rows|backward] [--heads HQ/HKV] [--tiles ROWSxKEYS[s]] [--reps R] [--json]
       bench --lm [--matmul-form tiled|direct|subgroup] [--matmul-block ROWSxCOLSxLANES] [--tokens T]
       bench --paged
Times the attention kernels on this machine's first adapter and prints a table (--json: one object a line).
With no flag, every case: lengths x head layouts (8/8, 32/8) x widths x masks x kernels, then the decode rows.
--window sizes the sliding cases (256 by default); --chunk the chunked mask (the window by default).
--lm: the language model's rows; --paged: decode over 4,096 cached tokens, contiguous against paged.";

    fn now_ms() -> f64 {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
    }

    struct Args {
        filter: BenchFilter,
        json: bool,
        reps: Repetitions,
        /// `--tiles ROWSxKEYS`: force the tiled kernel's tile sizes (tuning).
        tiles: Option<FlashTiles>,
        /// `--heads HQ/HKV`: only this head layout.
        heads: Option<(u32, u32)>,
        /// `--lm`: the language model's rows instead of attention's.
        lm: Option<LmArgs>,
        /// `--paged`: only the decode rows, paged and packed (they also end a run without filters).
        paged: bool,
    }

    #[derive(Default)]
    struct LmArgs {
        /// `--matmul-form`: instead of the adapter's.
        form: Option<MatmulForm>,
        /// `--matmul-block ROWSxCOLSxLANES`: the direct form's block (tuning).
        block: Option<DirectBlock>,
        /// `--tokens T`: the whole pass's length.
        tokens: Option<u32>,
    }

    /// The flags after the program's name.
    fn parse(flags: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut args = Args {
            filter: BenchFilter::default(),
            json: false,
            reps: Repetitions::default(),
            tiles: None,
            heads: None,
            lm: None,
            paged: false,
        };
        let mut chunk = None;
        let mut it = flags.into_iter();
        while let Some(flag) = it.next() {
            if flag == "--json" {
                args.json = true;
                continue;
            }
            if flag == "--paged" {
                args.paged = true;
                continue;
            }
            if flag == "--lm" {
                args.lm.get_or_insert_with(LmArgs::default);
                continue;
            }
            let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
            let number = || value.parse::<u32>().map_err(|e| format!("{flag} {value}: {e}"));
            match flag.as_str() {
                "--n" => args.filter.n = Some(number()?),
                "--d" => args.filter.d = Some(number()?),
                "--window" => args.filter.window = Some(number()?.into()),
                "--chunk" => chunk = Some(u64::from(number()?)),
                "--reps" => args.reps.max = number()?.max(1),
                "--mask" => args.filter.mask = Some(Mask::named(&value, 1, 1)?),
                // The matrix-unit kernel is native only, so the page's parser (`BenchKernel::from_str`) does not take it.
                "--kernel" if value == "coop" => args.filter.kernel = Some(bench::BenchKernel::Coop),
                "--kernel" => args.filter.kernel = Some(value.parse()?),
                "--tiles" => {
                    // A trailing "s" stages K/V in workgroup memory: 128x16s.
                    let (spec, stage_kv) = value.strip_suffix('s').map_or((value.as_str(), false), |v| (v, true));
                    let (rows, keys) = spec.split_once('x').ok_or("--tiles wants ROWSxKEYS[s], e.g. 128x16")?;
                    let parse = |x: &str| x.parse::<u32>().map_err(|e| format!("--tiles {value}: {e}"));
                    args.tiles =
                        Some(FlashTiles { rows_per_workgroup: parse(rows)?, keys_per_tile: parse(keys)?, stage_kv });
                }
                "--heads" => {
                    let (hq, hkv) = value.split_once('/').ok_or("--heads wants HQ/HKV, e.g. 8/8")?;
                    let parse = |x: &str| x.parse::<u32>().map_err(|e| format!("--heads {value}: {e}"));
                    args.heads = Some((parse(hq)?, parse(hkv)?));
                }
                "--matmul-form" => {
                    args.lm.get_or_insert_with(LmArgs::default).form = Some(match value.as_str() {
                        "tiled" => MatmulForm::Tiled,
                        "direct" => MatmulForm::Direct,
                        "subgroup" => MatmulForm::Subgroup,
                        _ => return Err(format!("--matmul-form {value}: tiled, direct or subgroup")),
                    })
                }
                "--matmul-block" => {
                    let sizes: Vec<u32> = value
                        .split('x')
                        .map(str::parse)
                        .collect::<Result<_, _>>()
                        .map_err(|e| format!("{flag} {value}: {e}"))?;
                    let [rows, cols, lanes] = sizes[..] else {
                        return Err("--matmul-block wants ROWSxCOLSxLANES, e.g. 4x4x8".into());
                    };
                    args.lm.get_or_insert_with(LmArgs::default).block = Some(DirectBlock { rows, cols, lanes });
                }
                "--tokens" => args.lm.get_or_insert_with(LmArgs::default).tokens = Some(number()?),
                _ => return Err(format!("unknown flag {flag}")),
            }
        }
        // The named mask takes its size whichever flag came first: a sliding one the window, a chunked
        // one the chunk, else the window (as the page's bench view does), else the default.
        if chunk.is_some() && !matches!(args.filter.mask, Some(Mask::Chunked { .. })) {
            return Err("--chunk sizes the chunked mask: add --mask chunked".into());
        }
        let window = args.filter.window.unwrap_or(bench::DEFAULT_WINDOW);
        args.filter.mask = args.filter.mask.map(|m| m.resized(window, chunk.unwrap_or(window)));
        Ok(args)
    }

    fn row(r: &BenchResult) -> String {
        let mask = if r.window > 0 { format!("{} {}", r.mask, r.window) } else { r.mask.to_string() };
        let heads = format!("{}/{}", r.h_q, r.h_kv);
        let mib = r.peak_bytes as f64 / (1u64 << 20) as f64;
        match (r.ms_median, r.ms_min, r.gflops) {
            (Some(med), Some(min), Some(g)) => format!(
                "{:<6} {:>6} {:>6} {:>4} {:<12} {:>10.2} {:>10.2} {:>9.2} {:>7.1}% {:>11.1}",
                r.kernel,
                r.n,
                heads,
                r.d,
                mask,
                med,
                min,
                g,
                100.0 * g / r.fma_gflops,
                mib
            ),
            _ => format!(
                "{:<6} {:>6} {:>6} {:>4} {:<12} {}",
                r.kernel,
                r.n,
                heads,
                r.d,
                mask,
                r.note.as_deref().unwrap_or("did not run")
            ),
        }
    }

    fn op_row(r: &OpResult) -> String {
        format!(
            "{:<24} {:<40} {:>8} {:>10.3} {:>10.3} {:>9.2} {:>7.1}%",
            r.name,
            r.shape,
            r.launches,
            r.ms_median,
            r.ms_min,
            r.gflops,
            100.0 * r.fraction_of_peak()
        )
    }

    /// The decode rows at 4,096 cached tokens of a Llama 3 8B layer: contiguous against paged, then the
    /// packed quantised caches against the contiguous f32 one.
    async fn run_paged(ctx: &GpuContext, kernels: &Kernels, fma: f64, reps: Repetitions) -> Result<(), String> {
        println!("paged decode: one query per head over the cache; flops = 4 d x attended pairs");
        println!(
            "{:<24} {:<40} {:>8} {:>10} {:>10} {:>9} {:>8}",
            "op", "shape", "launches", "ms median", "ms min", "GFLOP/s", "of peak"
        );
        let rows = bench_paged::run_paged_decode(ctx, kernels, fma, reps, now_ms).await.map_err(|e| e.to_string())?;
        for r in &rows {
            println!("{}", op_row(r));
        }
        if let Some(said) = paged_summary(&rows) {
            println!("{said}");
        }
        println!(
            "packed quantised caches (Generate's gencache, and fp8 E4M3 with one scale per tensor), dequantised as packed_attention reads them:"
        );
        let packed =
            bench_packed::run_packed_decode(ctx, kernels, fma, reps, now_ms).await.map_err(|e| e.to_string())?;
        for r in &packed {
            let against =
                rows.first().map_or(String::new(), |f| format!("  {:.2}x the f32 cache", r.ms_median / f.ms_median));
            println!("{}{against}", op_row(r));
        }
        Ok(())
    }

    /// The language model's rows: each matmul shape, then the whole forward pass of the shipped model.
    async fn run_lm(
        ctx: &GpuContext,
        kernels: &Kernels,
        lm: &LmArgs,
        fma: f64,
        reps: Repetitions,
    ) -> Result<(), String> {
        if let Some(form) = lm.form {
            kernels.matmul.set_form(form);
        }
        if let Some(block) = lm.block {
            kernels.matmul.set_block(block);
        }
        println!("adapter: {} · timing: {}", ctx.adapter, if ctx.timestamps { "GPU timestamps" } else { "wall clock" });
        println!("WGSL FMA peak (fma_peak.wgsl): {fma:.1} GFLOP/s; matmul flops = 2 x rows x inputs x outputs");
        println!("times are per launch; small shapes are launched several times in each timed submission");
        println!(
            "{:<24} {:<40} {:>8} {:>10} {:>10} {:>9} {:>8}",
            "op", "shape", "launches", "ms median", "ms min", "GFLOP/s", "of peak"
        );
        for shape in bench_lm::MATMUL_SHAPES {
            let r = bench_lm::run_matmul(ctx, kernels, shape, fma, reps, now_ms).await.map_err(|e| e.to_string())?;
            println!("{}", op_row(&r));
        }
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/www/models/attention-lab-tiny");
        let config = std::fs::read_to_string(format!("{dir}/config.json")).map_err(|e| format!("{dir}: {e}"))?;
        let safetensors = std::fs::read(format!("{dir}/model.safetensors")).map_err(|e| format!("{dir}: {e}"))?;
        let ck = Checkpoint::load(&config, &safetensors).map_err(|e| e.to_string())?;
        let weights = LmWeights::upload(ctx, &ck).map_err(|e| e.to_string())?;
        let tokens = lm.tokens.unwrap_or(256);
        let r = bench_lm::run_lm_forward(ctx, kernels, &weights, tokens, fma, reps, now_ms)
            .await
            .map_err(|e| e.to_string())?;
        println!("{}", op_row(&r));
        let cached = bench_lm::decode_cached_tokens(&ck.model);
        println!("decode (the two forms alternating; the new rows' copies not timed):");
        let rows = bench_lm::run_lm_decode(ctx, kernels, &weights, cached, fma, reps, now_ms)
            .await
            .map_err(|e| e.to_string())?;
        for r in &rows {
            println!("{}  {:.2}x contiguous", op_row(r), r.ms_median / rows[0].ms_median);
        }
        ctx.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| e.to_string())?;
        Ok(())
    }

    pub fn run(flags: impl IntoIterator<Item = String>) -> Result<(), String> {
        let flags: Vec<String> = flags.into_iter().collect();
        if flags.iter().any(|f| f == "--help" || f == "-h") {
            println!("{USAGE}");
            return Ok(());
        }
        let args = parse(flags)?;
        pollster::block_on(async {
            let ctx = GpuContext::new().await.map_err(|e| e.to_string())?;
            let kernels = Kernels::new(&ctx);
            kernels.flash.force_tiles(args.tiles);
            let fma = bench::measure_fma_gflops(&ctx, &kernels, now_ms).await.map_err(|e| e.to_string())?;
            if let Some(lm) = &args.lm {
                return run_lm(&ctx, &kernels, lm, fma, args.reps).await;
            }
            if args.paged {
                return run_paged(&ctx, &kernels, fma, args.reps).await;
            }
            if !args.json {
                println!(
                    "adapter: {} · timing: {}",
                    ctx.adapter,
                    if ctx.timestamps { "GPU timestamps" } else { "wall clock" }
                );
                println!(
                    "WGSL FMA peak (fma_peak.wgsl): {fma:.1} GFLOP/s; flops = 4 d x attended pairs (rows: 2 d); MiB = 2^20 bytes"
                );
                match &ctx.matrix_units {
                    Ok(units) => println!(
                        "coop: the tiled forward on the matrix units ({0}x{0}x{0} f16->f32, {1}-wide subgroups), \
                         f16 inputs; its % is of the FMA peak, which matrix units may pass",
                        units.side, units.subgroup_size
                    ),
                    Err(why) => println!("coop: no matrix units on this adapter ({why})"),
                }
                if args.filter.kernel == Some(bench::BenchKernel::Backward) {
                    println!("{}", bench::BACKWARD_FLOPS);
                }
                println!(
                    "{:<6} {:>6} {:>6} {:>4} {:<12} {:>10} {:>10} {:>9} {:>8} {:>11}",
                    "kernel", "n", "hq/hkv", "d", "mask", "ms median", "ms min", "GFLOP/s", "of peak", "memory MiB"
                );
            }
            let selected = bench::with_coop_rows(bench::cases(&args.filter))
                .into_iter()
                .filter(|c| args.heads.is_none_or(|h| h == (c.shape.h_q, c.shape.h_kv)));
            for case in selected {
                let result =
                    bench::run_case(&ctx, &kernels, &case, fma, args.reps, now_ms).await.map_err(|e| e.to_string())?;
                println!("{}", if args.json { result.json_line() } else { row(&result) });
            }
            if !args.json && args.filter == BenchFilter::default() && args.heads.is_none() && args.tiles.is_none() {
                run_paged(&ctx, &kernels, fma, args.reps).await?;
            }
            ctx.device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| e.to_string())?;
            Ok(())
        })
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn mask_of(flags: &str) -> Result<Option<Mask>, String> {
            parse(flags.split_whitespace().map(String::from)).map(|a| a.filter.mask)
        }

        #[test]
        fn a_chunked_mask_takes_the_chunk_else_the_window_else_the_default() {
            let chunked = |c| Some(Mask::Chunked { chunk_tokens: c });
            assert_eq!(mask_of("--mask chunked --chunk 64"), Ok(chunked(64)));
            assert_eq!(mask_of("--chunk 64 --window 32 --mask chunked"), Ok(chunked(64)));
            assert_eq!(mask_of("--mask chunked --window 32"), Ok(chunked(32)));
            assert_eq!(mask_of("--mask chunked"), Ok(chunked(bench::DEFAULT_WINDOW)));
        }

        #[test]
        fn a_sliding_mask_takes_the_window_and_a_chunk_without_a_chunked_mask_is_refused() {
            assert_eq!(mask_of("--window 32 --mask sliding"), Ok(Some(Mask::Sliding { window_tokens: 32 })));
            assert_eq!(mask_of("--mask causal --window 32"), Ok(Some(Mask::Causal)));
            for flags in ["--mask sliding --chunk 64", "--chunk 64"] {
                assert!(mask_of(flags).unwrap_err().contains("--mask chunked"), "{flags}");
            }
            assert!(mask_of("--mask chunked --chunk x").unwrap_err().starts_with("--chunk x"));
        }
    }
}
