    // The start of `main` in row_softmax.wgsl and row_softmax_subgroup.wgsl, after `tile`: statements
    // pasted into the function at its `// #include softmax_rows_start.wgsl` line, not a function, so
    // these arrays stay locals of `main` (CPU adapters keep them in registers only while every index
    // is a constant; passed around they could land in memory). Declares this invocation's R rows, their
    // scaled queries, running max m and sum l, the largest score of the current key block (`best`),
    // and the key-block walk (`walk`, starting at block `first`).
    var rows: array<Row, R>;
    var q_rows: array<array<vec4<f32>, D4>, R>;
    var m: array<f32, R>;
    var l: array<f32, R>;
    // OUT_BLOCK_MAX: each row's largest score in the current key block.
    var best = no_scores();
    for (var j = 0u; j < R; j++) {
        rows[j] = row_of(tile.kv_head, tile.row0, lid, j);
        for (var e = 0u; e < D4; e++) {
            q_rows[j][e] = q[rows[j].out_row * D4 + e] * params.scale;
        }
        m[j] = NO_SCORE;
        l[j] = 0.0;
    }
    // OUT_BLOCK_*: the key block being walked (the same for every row) and the first one.
    var walk = first_block(tile.key_lo);
    let first = walk.block;
