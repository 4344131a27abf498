// ZynBook WGSL for kernel `softmax_fused` (block: one block runs the whole body (256 threads) (block: threads=256))

struct ZynParams {
    u_logits_d0: i32,
}

@group(0) @binding(0) var<storage, read> u_logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> u_out: array<f32>;
@group(0) @binding(2) var<storage, read_write> zyn_err: array<atomic<i32>>;
@group(0) @binding(3) var<uniform> zyn_p: ZynParams;

var<workgroup> _tree_part1: array<f32, 256>;
var<workgroup> _tree_part2: array<f32, 256>;

// on the bits: a shader compiler may assume x == x
fn zyn_isnan_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
// max and min are numpy's maximum and minimum: NaN propagates, and of equal values the
// second (max(0.0, -0.0) is -0.0); each case its own select, or a shader compiler takes
// the first for its own max, which may give either zero and drop a NaN (OpenGL's did)
fn zyn_max_f32(a: f32, b: f32) -> f32 {
    let r = select(select(b, a, a > b), b, a == b);
    return select(select(r, b, zyn_isnan_f32(b)), a, zyn_isnan_f32(a)); }
fn zyn_exp_f32(x: f32) -> f32 {
    // the builtin's error grows with |x| (3 + 2 |x| ulp: exp(-79.3) was off by 3.7e-6 of
    // itself): Cody-Waite's reduction to |r| <= ln 2 / 2, Cephes' expf polynomial, 2^n
    if (!(x > -104.0f && x < 88.8f)) { return exp(x); }  // NaN, infinities, 0 and inf
    let n = floor(x * 1.44269504088896341f + 0.5f);
    let r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
    let y = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r
        + 4.1665795894e-2f) * r + 1.6666665459e-1f) * r + 5.0000001201e-1f) * r * r + r + 1.0f;
    // times 2^n by adding n to y's exponent bits (y in [0.7, 1.42]: exact while the result
    // is normal, and no float product a driver could reorder or flush; two ldexp calls made
    // the WebGPU softmax on an H200 twice as slow); below (n from -150, a subnormal result,
    // which llvmpipe's builtin flushed to 0, as it did exp(-86.99)) as 2^-63 * 2^(n + 63)
    // (n = 128: 2^127, then times 2, overflowing as it should)
    let m = min(n, 127.0f);
    if (n >= -125.0f) { return bitcast<f32>(bitcast<i32>(y) + (i32(m) << 23u)) * select(1.0f, 2.0f, n > m); }
    return y * 1.0842021724855044e-19f * bitcast<f32>(u32(i32(n) + 190i) << 23u); }
// the error flag (zynbook/compiler/errflag.py): the first failing site and its value win
fn zyn_fail(site: i32, v: i32) {
    loop {
        let r = atomicCompareExchangeWeak(&zyn_err[0], 0i, site);
        if (r.exchanged) { atomicStore(&zyn_err[1], v); break; }
        if (r.old_value != 0i) { break; }
    }
}
// an index outside 0..n-1 fails the site and reads element 0 instead
fn zyn_chk(i: i32, n: i32, site: i32) -> i32 {
    if (i < 0i || i >= n) { zyn_fail(site, i); return 0i; } return i; }

// block: one block runs the whole body (256 threads)
@compute @workgroup_size(256)
fn zyn_k_softmax_fused(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
    // the linear workgroup id of a dispatch of up to three dimensions
    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));
    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);
    let zyn_thread: i32 = i32(zyn_lid.x);
    let u_logits_d0: i32 = zyn_p.u_logits_d0;
    // _tree_part1: workgroup memory, declared above
    // _tree_part2: workgroup memory, declared above
    // line 3: let max_val = reduce(max, logits)
    let u__n1: i32 = u_logits_d0;
    var u__acc2: f32 = bitcast<f32>(0xff800000u);
    var _part1: f32 = bitcast<f32>(0xff800000u);
    for (var u__e3: i32 = (0i + (zyn_thread * 1i)); u__e3 < u__n1; u__e3 += (1i * 256i)) {
        _part1 = zyn_max_f32(_part1, u_logits[u__e3]);
    }
    _tree_part1[zyn_thread] = _part1;
    workgroupBarrier();
    if (((zyn_thread < 128i) && ((zyn_thread + 128i) < 256i))) {
        _tree_part1[zyn_thread] = zyn_max_f32(_tree_part1[zyn_thread], _tree_part1[(zyn_thread + 128i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 64i) && ((zyn_thread + 64i) < 256i))) {
        _tree_part1[zyn_thread] = zyn_max_f32(_tree_part1[zyn_thread], _tree_part1[(zyn_thread + 64i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 32i) && ((zyn_thread + 32i) < 256i))) {
        _tree_part1[zyn_thread] = zyn_max_f32(_tree_part1[zyn_thread], _tree_part1[(zyn_thread + 32i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 16i) && ((zyn_thread + 16i) < 256i))) {
        _tree_part1[zyn_thread] = zyn_max_f32(_tree_part1[zyn_thread], _tree_part1[(zyn_thread + 16i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 8i) && ((zyn_thread + 8i) < 256i))) {
        _tree_part1[zyn_thread] = zyn_max_f32(_tree_part1[zyn_thread], _tree_part1[(zyn_thread + 8i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 4i) && ((zyn_thread + 4i) < 256i))) {
        _tree_part1[zyn_thread] = zyn_max_f32(_tree_part1[zyn_thread], _tree_part1[(zyn_thread + 4i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 2i) && ((zyn_thread + 2i) < 256i))) {
        _tree_part1[zyn_thread] = zyn_max_f32(_tree_part1[zyn_thread], _tree_part1[(zyn_thread + 2i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 1i) && ((zyn_thread + 1i) < 256i))) {
        _tree_part1[zyn_thread] = zyn_max_f32(_tree_part1[zyn_thread], _tree_part1[(zyn_thread + 1i)]);
    }
    workgroupBarrier();
    _part1 = _tree_part1[0i];
    u__acc2 = zyn_max_f32(u__acc2, _part1);
    let u_max_val: f32 = u__acc2;
    // line 6: let sum_exp = reduce(+, exp_vals)
    let u__n4: i32 = u_logits_d0;
    var u__acc5: f32 = 0.0f;
    var _part2: f32 = 0.0f;
    var _wide1_0: f32 = 0.0f;
    var _wide2_0: f32 = 0.0f;
    for (var _chunk2: i32 = (0i + (zyn_thread * 1i)); _chunk2 < u__n4; _chunk2 += (((1i * 256i) * 256i) * 256i)) {
        var _part2_0: f32 = 0.0f;
        for (var _chunk1: i32 = _chunk2; _chunk1 < (_chunk2 + min((u__n4 - _chunk2), (((1i * 256i) * 256i) * 256i))); _chunk1 += ((1i * 256i) * 256i)) {
            var _part1_0: f32 = 0.0f;
            for (var u__e6: i32 = _chunk1; u__e6 < (_chunk1 + min((u__n4 - _chunk1), ((1i * 256i) * 256i))); u__e6 += (1i * 256i)) {
                _part1_0 = (_part1_0 + zyn_exp_f32((u_logits[u__e6] - u_max_val)));
            }
            _part2_0 = (_part2_0 + _part1_0);
        }
        _wide2_0 = (_wide2_0 + _part2_0);
    }
    _wide1_0 = (_wide1_0 + _wide2_0);
    _part2 = (_part2 + _wide1_0);
    _tree_part2[zyn_thread] = _part2;
    workgroupBarrier();
    if (((zyn_thread < 128i) && ((zyn_thread + 128i) < 256i))) {
        _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 128i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 64i) && ((zyn_thread + 64i) < 256i))) {
        _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 64i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 32i) && ((zyn_thread + 32i) < 256i))) {
        _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 32i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 16i) && ((zyn_thread + 16i) < 256i))) {
        _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 16i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 8i) && ((zyn_thread + 8i) < 256i))) {
        _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 8i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 4i) && ((zyn_thread + 4i) < 256i))) {
        _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 4i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 2i) && ((zyn_thread + 2i) < 256i))) {
        _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 2i)]);
    }
    workgroupBarrier();
    if (((zyn_thread < 1i) && ((zyn_thread + 1i) < 256i))) {
        _tree_part2[zyn_thread] = (_tree_part2[zyn_thread] + _tree_part2[(zyn_thread + 1i)]);
    }
    workgroupBarrier();
    _part2 = _tree_part2[0i];
    u__acc5 = (u__acc5 + _part2);
    let u_sum_exp: f32 = u__acc5;
    // line 7: out = exp_vals / sum_exp
    let u__n7: i32 = u_logits_d0;
    for (var u__e8: i32 = (0i + (zyn_thread * 1i)); u__e8 < u__n7; u__e8 += (1i * 256i)) {
        u_out[u__e8] = (zyn_exp_f32((u_logits[zyn_chk(select(u__e8, 0i, (u_logits_d0 == 1i)), u_logits_d0, 1i)] - u_max_val)) / u_sum_exp);
    }
    workgroupBarrier();
}

