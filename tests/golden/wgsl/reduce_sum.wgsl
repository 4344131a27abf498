// ZynBook WGSL for kernel `reduce_sum` (reduce(+): min(ceil(total / 1024), 1024) block(s) of 256 thread(s), partials combined in order by a second launch (reduce: layout=whole, threads=256, blocks=0, chunk=0, acc=f32))

struct ZynParams {
    u_data_d0: i32,
    u_len: i32,
}

@group(0) @binding(0) var<storage, read> u_data: array<f32>;
@group(0) @binding(1) var<storage, read_write> u_out: array<f32>;
@group(0) @binding(2) var<storage, read_write> _part: array<f32>;
@group(0) @binding(3) var<uniform> zyn_p: ZynParams;

var<workgroup> _tree: array<f32, 256>;

// signed division and remainder truncating as C, through unsigned ones
fn zyn_tdiv(a: i32, b: i32) -> i32 {
    let q = bitcast<i32>(bitcast<u32>(abs(a)) / bitcast<u32>(abs(b)));
    return select(q, -q, (a < 0i) != (b < 0i)); }

// reduce(+): a partial per thread, then per block
@compute @workgroup_size(256)
fn zyn_k_reduce_sum(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
    // the linear workgroup id of a dispatch of up to three dimensions
    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));
    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);
    let zyn_thread: i32 = i32(zyn_lid.x);
    let u_data_d0: i32 = zyn_p.u_data_d0;
    let u_len: i32 = zyn_p.u_len;
    // _tree: workgroup memory, declared above
    let _n1: i32 = max(u_len, 0i);
    var _acc: f32 = 0.0f;
    // line 3: for i in 0..len:
    for (var _g: i32 = ((zyn_block * 256i) + zyn_thread); _g < _n1; _g += (zyn_blocks * 256i)) {
        let u_i: i32 = _g;
        // line 4: yield data[i]
        _acc = (_acc + u_data[u_i]);
    }
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
    if ((zyn_thread == 0i)) {
        _part[zyn_block] = _acc;
    }
}

// the block partials, combined in order
@compute @workgroup_size(256)
fn zyn_k_reduce_sum_final(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
    // the linear workgroup id of a dispatch of up to three dimensions
    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));
    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);
    let zyn_thread: i32 = i32(zyn_lid.x);
    let u_data_d0: i32 = zyn_p.u_data_d0;
    let u_len: i32 = zyn_p.u_len;
    // _tree: workgroup memory, declared above
    var _acc: f32 = 0.0f;
    for (var _b: i32 = zyn_thread; _b < max(min(zyn_tdiv((max(u_len, 0i) + 1023i), 1024i), 1024i), 1i); _b += 256i) {
        _acc = (_acc + _part[_b]);
    }
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
    if ((zyn_thread == 0i)) {
        u_out[0i] = _acc;
    }
}

