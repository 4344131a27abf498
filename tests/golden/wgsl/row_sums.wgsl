// ZynBook WGSL for kernel `row_sums` (reduce(+, axis=1): one block per output (reduce: layout=block_rows, threads=256, blocks=0, chunk=0, acc=f32))

struct ZynParams {
    u_cols: i32,
    u_matrix_d0: i32,
    u_matrix_d1: i32,
    u_rows: i32,
}

@group(0) @binding(0) var<storage, read> u_matrix: array<f32>;
@group(0) @binding(1) var<storage, read_write> u_out: array<f32>;
@group(0) @binding(2) var<uniform> zyn_p: ZynParams;

var<workgroup> _tree: array<f32, 256>;

// reduce(+, axis=1): one block per output
@compute @workgroup_size(256)
fn zyn_k_row_sums(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
    // the linear workgroup id of a dispatch of up to three dimensions
    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));
    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);
    let zyn_thread: i32 = i32(zyn_lid.x);
    let u_cols: i32 = zyn_p.u_cols;
    let u_matrix_d0: i32 = zyn_p.u_matrix_d0;
    let u_matrix_d1: i32 = zyn_p.u_matrix_d1;
    let u_rows: i32 = zyn_p.u_rows;
    // _tree: workgroup memory, declared above
    let _n1: i32 = max(u_rows, 0i);
    let _n2: i32 = max(u_cols, 0i);
    let _row: i32 = min(zyn_block, (_n1 - 1i));
    var _acc: f32 = 0.0f;
    // line 3: for i in 0..rows, j in 0..cols:
    let u_i: i32 = _row;
    var _wide1_0: f32 = 0.0f;
    var _wide2_0: f32 = 0.0f;
    for (var _chunk2: i32 = zyn_thread; _chunk2 < _n2; _chunk2 += ((256i * 256i) * 256i)) {
        var _part2_0: f32 = 0.0f;
        for (var _chunk1: i32 = _chunk2; _chunk1 < (_chunk2 + min((_n2 - _chunk2), ((256i * 256i) * 256i))); _chunk1 += (256i * 256i)) {
            var _part1_0: f32 = 0.0f;
            for (var _t: i32 = _chunk1; _t < (_chunk1 + min((_n2 - _chunk1), (256i * 256i))); _t += 256i) {
                let u_j: i32 = _t;
                let _flat: i32 = ((_row * _n2) + _t);
                // line 4: yield matrix[i, j]
                _part1_0 = (_part1_0 + u_matrix[((u_i * u_matrix_d1) + u_j)]);
            }
            _part2_0 = (_part2_0 + _part1_0);
        }
        _wide2_0 = (_wide2_0 + _part2_0);
    }
    _wide1_0 = (_wide1_0 + _wide2_0);
    _acc = (_acc + _wide1_0);
    _tree[zyn_thread] = _acc;
    workgroupBarrier();
    if (((zyn_thread < 128i) && ((zyn_thread + 128i) < 256i))) {
        _tree[zyn_thread] = (_tree[zyn_thread] + _tree[(zyn_thread + 128i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 64i) && ((zyn_thread + 64i) < 256i))) {
        _tree[zyn_thread] = (_tree[zyn_thread] + _tree[(zyn_thread + 64i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 32i) && ((zyn_thread + 32i) < 256i))) {
        _tree[zyn_thread] = (_tree[zyn_thread] + _tree[(zyn_thread + 32i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 16i) && ((zyn_thread + 16i) < 256i))) {
        _tree[zyn_thread] = (_tree[zyn_thread] + _tree[(zyn_thread + 16i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 8i) && ((zyn_thread + 8i) < 256i))) {
        _tree[zyn_thread] = (_tree[zyn_thread] + _tree[(zyn_thread + 8i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 4i) && ((zyn_thread + 4i) < 256i))) {
        _tree[zyn_thread] = (_tree[zyn_thread] + _tree[(zyn_thread + 4i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 2i) && ((zyn_thread + 2i) < 256i))) {
        _tree[zyn_thread] = (_tree[zyn_thread] + _tree[(zyn_thread + 2i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 1i) && ((zyn_thread + 1i) < 256i))) {
        _tree[zyn_thread] = (_tree[zyn_thread] + _tree[(zyn_thread + 1i)]);
    }
    workgroupBarrier();
    _acc = _tree[0i];
    if (((zyn_thread == 0i) && (zyn_block < _n1))) {
        u_out[_row] = _acc;
    }
}

