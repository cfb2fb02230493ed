//! Links people already share must keep their meaning: each one below, parsed and written back,
//! gives exactly the query string this version of the app wrote for it when the views' parameters were
//! first split out of one flat state (byte for byte), with as many notices. A change to a key, a
//! default or the order of the written parameters fails here.

use attention_lab::state::AppState;

/// (link as shared, the query string the app writes back for it, notices it shows).
const LINKS: &[(&str, &str, usize)] = &[
    ("?backend=cpu&model=gemma-4-e4b", "backend=cpu&model=gemma-4-e4b", 0),
    ("?backend=cpu&text=the%20cat%20sat", "text=the%20cat%20sat&backend=cpu", 0),
    ("?focus=6&steps=on", "focus=6&steps=on", 0),
    ("?heads=0-99&focus=77&pool=sum&tok=bpe&tiles=maybe&n=0&text=still%20fine", "text=still%20fine", 6),
    ("?model=gemma-3-27b&n=8192&heads=0-7", "model=gemma-3-27b&n=8192&heads=0-7", 0),
    ("?model=gemma-3-27b&text=one%20two%20three%20four", "text=one%20two%20three%20four&model=gemma-3-27b", 0),
    ("?n=100000&heads=0", "n=100000&heads=0", 0),
    ("?n=1024&heads=0-1", "n=1024&heads=0-1", 0),
    ("?n=256", "n=256", 0),
    ("?n=4096&heads=0-5", "n=4096&heads=0-5", 0),
    ("?text=", "text=", 0),
    ("?text=a%20b%20c%20d%20e%20f", "text=a%20b%20c%20d%20e%20f", 0),
    ("?tok=char&text=abcab&heads=6", "text=abcab&tok=char&heads=6", 0),
    ("?view=bench&backend=cpu&n=256", "view=bench&backend=cpu&n=256", 0),
    ("?view=backward&jscale=one&row=3&focus=2", "view=backward&focus=2&row=3&jscale=one", 0),
    (
        "?view=backward&eta=0.5&target=4&model=attention-lab-tiny&layer=1",
        "view=backward&model=attention-lab-tiny&layer=1&target=4&eta=0.5",
        0,
    ),
    ("?view=backward&target=text&eta=0.1", "view=backward", 0),
    ("?view=backward&target=-1&eta=nan", "view=backward", 2),
    (
        "?view=memory&scheme=kivi-int2&recent=8&group=16&tech=quant",
        "view=memory&tech=quant&group=16&recent=8&scheme=kivi-int2",
        0,
    ),
    ("?view=memory&tech=paged&group=7&recent=999&scheme=%3Cb%3E", "view=memory", 4),
    ("?view=memory&policy=h2o&keep=16&tech=evict", "view=memory&tech=evict&keep=16&policy=h2o", 0),
    ("?view=memory&tech=evict&keep=0&policy=%3Cb%3E", "view=memory&tech=evict", 2),
    ("?view=memory&tech=evict&keep=99999999999999999999999&policy=sinks", "view=memory&tech=evict", 1),
    (
        "?view=mla&rot=whole&mhead=2&qheads=3&tokens=100&model=deepseek-v2&ctx=4096",
        "view=mla&model=deepseek-v2&ctx=4096&tokens=100&qheads=3&mhead=2&rot=whole",
        0,
    ),
    ("?view=mla&tokens=5000&qheads=0&mhead=9&rot=%3Cb%3E", "view=mla&tokens=256", 4),
    ("?near=2&view=distance&teach=off&layer=1", "view=distance&layer=1&teach=off&near=2", 0),
    ("?view=distance&near=-1&teach=maybe", "view=distance", 2),
    ("?view=bench&n=256&d=64&mask=causal", "view=bench&mask=causal&n=256&d=64", 0),
    ("?view=bench&n=131072&d=128&mask=sliding&window=1", "view=bench&mask=sliding&window=1&n=131072&d=128", 0),
    ("?view=compare&model=llama-3-8b&ctx=131072&dtype=fp16", "view=compare&ctx=131072", 0),
    ("?view=compare&model=llama-3-8b&variants=mha,gqa5,mqa", "view=compare&variants=mha%2Cgqa5%2Cmqa", 0),
    ("?view=compare&model=llama-4-maverick&ctx=8192", "view=compare&model=llama-4-maverick", 0),
    ("?view=compare&variants=mha,warp9", "view=compare", 1),
    ("?view=kv&cfg=L32.d4096.h32.kv5", "view=kv", 1),
    ("?view=kv&cfg=L4.d256.h4.kv2.pat1w64-1g&dtype=fp16", "view=kv&cfg=L4.d256.h4.kv2.pat1w64-1g", 0),
    ("?view=kv&model=gemma-3-27b&ctx=131072&dtype=bf16", "view=kv&model=gemma-3-27b&ctx=131072&dtype=bf16", 0),
    ("?view=kv&model=llama-3-8b&ctx=8192&dtype=fp16", "view=kv", 0),
    (
        "?view=kv&model=mistral-7b&ctx=32768&axis=log&budget=24.5&weights=bf16",
        "view=kv&model=mistral-7b&ctx=32768&axis=log&budget=24.5&weights=bf16",
        0,
    ),
    (
        "?view=kv&model=deepseek-v3&ctx=100000&dtype=int2&weights=off&budget=80",
        "view=kv&model=deepseek-v3&ctx=100000&dtype=int2",
        0,
    ),
    ("?view=nope&mask=diagonal&window=-4&seed=x&zzz=1&text=still%20works", "text=still%20works", 5),
    (
        "?mask=sliding&window=3&chunk=7&seed=99&scale=log&layer=5&model=gemma-3-27b",
        "mask=sliding&window=3&chunk=7&seed=99&scale=log&model=gemma-3-27b&layer=5",
        0,
    ),
    ("?mask=chunked&chunk=5&model=llama-4-scout&layer=3", "mask=chunked&chunk=5&model=llama-4-scout&layer=3", 0),
    ("?mask=full&window=4", "mask=full&window=4", 0),
    // A chunk the link names is written back even at its default (the benchmark sizes a named
    // chunked mask with it), as a window is.
    ("?mask=chunked&chunk=4", "mask=chunked&chunk=4", 0),
    (
        "?src=le%20chat%20%26%20%3Ci%3E&text=the%20cat&tok=word&pool=mean&teach=off&tiles=on&focus=2&heads=0-3,8",
        "text=the%20cat&src=le%20chat%20%26%20%3Ci%3E&heads=0-3%2C8&pool=mean&focus=2&teach=off&tiles=on",
        0,
    ),
    ("?view=lesson&lesson=kv-cache&step=2", "view=lesson&lesson=kv-cache&step=2", 0),
    ("?lesson=intro&step=1&view=heatmaps&model=qwen3-8b", "model=qwen3-8b&lesson=intro&step=1", 0),
    ("?n=65536&src=x", "n=65536&src=x", 0),
    ("?cfg=L1.d16384.h1&n=65536", "cfg=L1.d16384.h1&n=65536", 0),
    (
        "?text=h%C3%A9llo+%26+%3Cb%3Eworld%3C%2Fb%3E+100%25",
        "text=h%C3%A9llo%20%26%20%3Cb%3Eworld%3C%2Fb%3E%20100%25",
        0,
    ),
    ("?view=KV&MODEL=x&&&=&a", "", 4),
    ("?d=48&n=0&ctx=0&budget=abc&variants=", "", 5),
    ("?layer=99&model=gemma-4-e4b&heads=0-3,9&focus=8", "model=gemma-4-e4b", 3),
    ("?scale=log&axis=log&backend=gpu&teach=1&steps=0", "scale=log&axis=log", 0),
    ("?tstep=3&focus=0&steps=on&trow=63", "focus=0&steps=on&trow=63&tstep=3", 0),
    ("?focus=0&steps=on&trow=64&tstep=-1", "focus=0&steps=on", 2),
    (
        "?view=compare&model=deepseek-v2&variants=mha,gqa8,mqa,mla,sw4096,hyb5w1024,kv1,xl2&dtype=fp8&ctx=32768",
        "view=compare&model=deepseek-v2&ctx=32768&dtype=fp8",
        1,
    ),
];

#[test]
fn existing_links_are_written_back_byte_for_byte() {
    let mut wrong = Vec::new();
    for &(link, written, notices) in LINKS {
        let (state, got_notices) = AppState::from_query(link);
        if state.to_query() != written || got_notices.len() != notices {
            wrong.push(format!("{link}\n  wrote {}\n  want  {written} ({got_notices:?})", state.to_query()));
        }
        // What the page writes reopens the same state, without notices.
        let (again, again_notices) = AppState::from_query(written);
        assert_eq!(again, state, "{written}");
        assert!(again_notices.is_empty(), "{written}: {again_notices:?}");
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
