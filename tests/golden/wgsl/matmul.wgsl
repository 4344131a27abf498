// ZynBook WGSL for kernel `matmul` (contraction as GEMM: every size; 128x128x8 tiles in two shared-memory buffers, 8x8 per thread (gemm: bm=128, bn=128, bk=8, tm=8, tn=8, width=1, mma=False, stages=0, swizzle=False, wgmma=False, tma=False, pad=0))

struct ZynParams {
    u_A_d0: i32,
    u_A_d1: i32,
    u_B_d0: i32,
    u_B_d1: i32,
    u_K: i32,
    u_M: i32,
    u_N: i32,
}

@group(0) @binding(0) var<storage, read> u_A: array<f32>;
@group(0) @binding(1) var<storage, read> u_B: array<f32>;
@group(0) @binding(2) var<storage, read_write> u_out: array<f32>;
@group(0) @binding(3) var<uniform> zyn_p: ZynParams;

var<workgroup> _shm: array<f32, 2048>;
var<workgroup> _shn: array<f32, 2048>;

// signed division and remainder truncating as C, through unsigned ones
fn zyn_tdiv(a: i32, b: i32) -> i32 {
    let q = bitcast<i32>(bitcast<u32>(abs(a)) / bitcast<u32>(abs(b)));
    return select(q, -q, (a < 0i) != (b < 0i)); }
fn zyn_trem(a: i32, b: i32) -> i32 {
    let r = bitcast<i32>(bitcast<u32>(abs(a)) % bitcast<u32>(abs(b)));
    return select(r, -r, a < 0i); }
// x + 0.0, a zero's sign from the bits (a shader compiler may fold x + 0.0 to x): 0.0 for a
// zero x, as -0.0 + 0.0 is
fn zyn_addz_f32(x: f32) -> f32 { return select(x, 0.0f, (bitcast<u32>(x) << 1u) == 0u); }

// contraction as GEMM: every size; 128x128x8 tiles in two shared-memory buffers, 8x8 per thread
@compute @workgroup_size(256)
fn zyn_k_matmul(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
    // the linear workgroup id of a dispatch of up to three dimensions
    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));
    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);
    let zyn_thread: i32 = i32(zyn_lid.x);
    let u_A_d0: i32 = zyn_p.u_A_d0;
    let u_A_d1: i32 = zyn_p.u_A_d1;
    let u_B_d0: i32 = zyn_p.u_B_d0;
    let u_B_d1: i32 = zyn_p.u_B_d1;
    let u_K: i32 = zyn_p.u_K;
    let u_M: i32 = zyn_p.u_M;
    let u_N: i32 = zyn_p.u_N;
    // _shm: workgroup memory, declared above
    // _shn: workgroup memory, declared above
    let _nM1: i32 = max(u_M, 0i);
    let _nN2: i32 = max(u_N, 0i);
    let _nK3: i32 = max(u_K, 0i);
    let _tm4: i32 = zyn_tdiv((_nM1 + 127i), 128i);
    let _tn5: i32 = zyn_tdiv((_nN2 + 127i), 128i);
    let _tb6: i32 = (_tm4 * _tn5);
    var _regm_0: f32;
    var _regm_1: f32;
    var _regm_2: f32;
    var _regm_3: f32;
    var _regn_0: f32;
    var _regn_1: f32;
    var _regn_2: f32;
    var _regn_3: f32;
    var _a: array<f32, 8>;
    var _b: array<f32, 8>;
    let _tx: i32 = zyn_trem(zyn_thread, 16i);
    let _ty: i32 = zyn_tdiv(zyn_thread, 16i);
    var _acc: array<f32, 64>;
    // line 4: for i in 0..M, j in 0..N:
    for (var _tile: i32 = zyn_block; _tile < _tb6; _tile += zyn_blocks) {
        let _tb: i32 = zyn_trem(_tile, _tb6);
        let _m0: i32 = (zyn_tdiv(_tb, _tn5) * 128i);
        let _n0: i32 = (zyn_trem(_tb, _tn5) * 128i);
        for (var _z: i32 = 0i; _z < 64i; _z++) {
            _acc[_z] = 0.0f;
        }
        let _nk7: i32 = zyn_tdiv((_nK3 + 7i), 8i);
        {
            let _x_0: i32 = zyn_tdiv(zyn_thread, 8i);
            let _k_0: i32 = zyn_trem(zyn_thread, 8i);
            var _v15_0: f32 = 0.0f;
            if ((((_m0 + _x_0) < _nM1) && (_k_0 < _nK3))) {
                let u_i_1_0: i32 = (_m0 + _x_0);
                // line 6: for k in 0..K:
                let u_k_2_0: i32 = _k_0;
                _v15_0 = u_A[((u_i_1_0 * u_A_d1) + u_k_2_0)];
            }
            _regm_0 = _v15_0;
            let _x_1: i32 = (zyn_tdiv(zyn_thread, 8i) + 32i);
            let _k_1: i32 = zyn_trem(zyn_thread, 8i);
            var _v15_1: f32 = 0.0f;
            if ((((_m0 + _x_1) < _nM1) && (_k_1 < _nK3))) {
                let u_i_1_1: i32 = (_m0 + _x_1);
                let u_k_2_1: i32 = _k_1;
                _v15_1 = u_A[((u_i_1_1 * u_A_d1) + u_k_2_1)];
            }
            _regm_1 = _v15_1;
            let _x_2: i32 = (zyn_tdiv(zyn_thread, 8i) + 64i);
            let _k_2: i32 = zyn_trem(zyn_thread, 8i);
            var _v15_2: f32 = 0.0f;
            if ((((_m0 + _x_2) < _nM1) && (_k_2 < _nK3))) {
                let u_i_1_2: i32 = (_m0 + _x_2);
                let u_k_2_2: i32 = _k_2;
                _v15_2 = u_A[((u_i_1_2 * u_A_d1) + u_k_2_2)];
            }
            _regm_2 = _v15_2;
            let _x_3: i32 = (zyn_tdiv(zyn_thread, 8i) + 96i);
            let _k_3: i32 = zyn_trem(zyn_thread, 8i);
            var _v15_3: f32 = 0.0f;
            if ((((_m0 + _x_3) < _nM1) && (_k_3 < _nK3))) {
                let u_i_1_3: i32 = (_m0 + _x_3);
                let u_k_2_3: i32 = _k_3;
                _v15_3 = u_A[((u_i_1_3 * u_A_d1) + u_k_2_3)];
            }
            _regm_3 = _v15_3;
        }
        {
            let _x_0: i32 = zyn_trem(zyn_thread, 128i);
            let _k_0: i32 = zyn_tdiv(zyn_thread, 128i);
            var _v17_0: f32 = 0.0f;
            if ((((_n0 + _x_0) < _nN2) && (_k_0 < _nK3))) {
                let u_j_1_0: i32 = (_n0 + _x_0);
                let u_k_3_0: i32 = _k_0;
                _v17_0 = u_B[((u_k_3_0 * u_B_d1) + u_j_1_0)];
            }
            _regn_0 = _v17_0;
            let _x_1: i32 = zyn_trem(zyn_thread, 128i);
            let _k_1: i32 = (zyn_tdiv(zyn_thread, 128i) + 2i);
            var _v17_1: f32 = 0.0f;
            if ((((_n0 + _x_1) < _nN2) && (_k_1 < _nK3))) {
                let u_j_1_1: i32 = (_n0 + _x_1);
                let u_k_3_1: i32 = _k_1;
                _v17_1 = u_B[((u_k_3_1 * u_B_d1) + u_j_1_1)];
            }
            _regn_1 = _v17_1;
            let _x_2: i32 = zyn_trem(zyn_thread, 128i);
            let _k_2: i32 = (zyn_tdiv(zyn_thread, 128i) + 4i);
            var _v17_2: f32 = 0.0f;
            if ((((_n0 + _x_2) < _nN2) && (_k_2 < _nK3))) {
                let u_j_1_2: i32 = (_n0 + _x_2);
                let u_k_3_2: i32 = _k_2;
                _v17_2 = u_B[((u_k_3_2 * u_B_d1) + u_j_1_2)];
            }
            _regn_2 = _v17_2;
            let _x_3: i32 = zyn_trem(zyn_thread, 128i);
            let _k_3: i32 = (zyn_tdiv(zyn_thread, 128i) + 6i);
            var _v17_3: f32 = 0.0f;
            if ((((_n0 + _x_3) < _nN2) && (_k_3 < _nK3))) {
                let u_j_1_3: i32 = (_n0 + _x_3);
                let u_k_3_3: i32 = _k_3;
                _v17_3 = u_B[((u_k_3_3 * u_B_d1) + u_j_1_3)];
            }
            _regn_3 = _v17_3;
        }
        {
            let _x_0: i32 = zyn_tdiv(zyn_thread, 8i);
            let _k_0: i32 = zyn_trem(zyn_thread, 8i);
            _shm[((_k_0 * 128i) + _x_0)] = _regm_0;
            let _x_1: i32 = (zyn_tdiv(zyn_thread, 8i) + 32i);
            let _k_1: i32 = zyn_trem(zyn_thread, 8i);
            _shm[((_k_1 * 128i) + _x_1)] = _regm_1;
            let _x_2: i32 = (zyn_tdiv(zyn_thread, 8i) + 64i);
            let _k_2: i32 = zyn_trem(zyn_thread, 8i);
            _shm[((_k_2 * 128i) + _x_2)] = _regm_2;
            let _x_3: i32 = (zyn_tdiv(zyn_thread, 8i) + 96i);
            let _k_3: i32 = zyn_trem(zyn_thread, 8i);
            _shm[((_k_3 * 128i) + _x_3)] = _regm_3;
        }
        {
            let _x_0: i32 = zyn_trem(zyn_thread, 128i);
            let _k_0: i32 = zyn_tdiv(zyn_thread, 128i);
            _shn[((_k_0 * 128i) + _x_0)] = _regn_0;
            let _x_1: i32 = zyn_trem(zyn_thread, 128i);
            let _k_1: i32 = (zyn_tdiv(zyn_thread, 128i) + 2i);
            _shn[((_k_1 * 128i) + _x_1)] = _regn_1;
            let _x_2: i32 = zyn_trem(zyn_thread, 128i);
            let _k_2: i32 = (zyn_tdiv(zyn_thread, 128i) + 4i);
            _shn[((_k_2 * 128i) + _x_2)] = _regn_2;
            let _x_3: i32 = zyn_trem(zyn_thread, 128i);
            let _k_3: i32 = (zyn_tdiv(zyn_thread, 128i) + 6i);
            _shn[((_k_3 * 128i) + _x_3)] = _regn_3;
        }
        workgroupBarrier();
        for (var _kt: i32 = 0i; _kt < _nk7; _kt++) {
            if (((_kt + 1i) < _nk7)) {
                {
                    let _x_0: i32 = zyn_tdiv(zyn_thread, 8i);
                    let _k_0: i32 = zyn_trem(zyn_thread, 8i);
                    var _v9_0: f32 = 0.0f;
                    if ((((_m0 + _x_0) < _nM1) && ((((_kt + 1i) * 8i) + _k_0) < _nK3))) {
                        let u_i_0: i32 = (_m0 + _x_0);
                        let u_k_0: i32 = (((_kt + 1i) * 8i) + _k_0);
                        _v9_0 = u_A[((u_i_0 * u_A_d1) + u_k_0)];
                    }
                    _regm_0 = _v9_0;
                    let _x_1: i32 = (zyn_tdiv(zyn_thread, 8i) + 32i);
                    let _k_1: i32 = zyn_trem(zyn_thread, 8i);
                    var _v9_1: f32 = 0.0f;
                    if ((((_m0 + _x_1) < _nM1) && ((((_kt + 1i) * 8i) + _k_1) < _nK3))) {
                        let u_i_1: i32 = (_m0 + _x_1);
                        let u_k_1: i32 = (((_kt + 1i) * 8i) + _k_1);
                        _v9_1 = u_A[((u_i_1 * u_A_d1) + u_k_1)];
                    }
                    _regm_1 = _v9_1;
                    let _x_2: i32 = (zyn_tdiv(zyn_thread, 8i) + 64i);
                    let _k_2: i32 = zyn_trem(zyn_thread, 8i);
                    var _v9_2: f32 = 0.0f;
                    if ((((_m0 + _x_2) < _nM1) && ((((_kt + 1i) * 8i) + _k_2) < _nK3))) {
                        let u_i_2: i32 = (_m0 + _x_2);
                        let u_k_2: i32 = (((_kt + 1i) * 8i) + _k_2);
                        _v9_2 = u_A[((u_i_2 * u_A_d1) + u_k_2)];
                    }
                    _regm_2 = _v9_2;
                    let _x_3: i32 = (zyn_tdiv(zyn_thread, 8i) + 96i);
                    let _k_3: i32 = zyn_trem(zyn_thread, 8i);
                    var _v9_3: f32 = 0.0f;
                    if ((((_m0 + _x_3) < _nM1) && ((((_kt + 1i) * 8i) + _k_3) < _nK3))) {
                        let u_i_3: i32 = (_m0 + _x_3);
                        let u_k_3: i32 = (((_kt + 1i) * 8i) + _k_3);
                        _v9_3 = u_A[((u_i_3 * u_A_d1) + u_k_3)];
                    }
                    _regm_3 = _v9_3;
                }
                {
                    let _x_0: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_0: i32 = zyn_tdiv(zyn_thread, 128i);
                    var _v11_0: f32 = 0.0f;
                    if ((((_n0 + _x_0) < _nN2) && ((((_kt + 1i) * 8i) + _k_0) < _nK3))) {
                        let u_j_0: i32 = (_n0 + _x_0);
                        let u_k_1_0: i32 = (((_kt + 1i) * 8i) + _k_0);
                        _v11_0 = u_B[((u_k_1_0 * u_B_d1) + u_j_0)];
                    }
                    _regn_0 = _v11_0;
                    let _x_1: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_1: i32 = (zyn_tdiv(zyn_thread, 128i) + 2i);
                    var _v11_1: f32 = 0.0f;
                    if ((((_n0 + _x_1) < _nN2) && ((((_kt + 1i) * 8i) + _k_1) < _nK3))) {
                        let u_j_1: i32 = (_n0 + _x_1);
                        let u_k_1_1: i32 = (((_kt + 1i) * 8i) + _k_1);
                        _v11_1 = u_B[((u_k_1_1 * u_B_d1) + u_j_1)];
                    }
                    _regn_1 = _v11_1;
                    let _x_2: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_2: i32 = (zyn_tdiv(zyn_thread, 128i) + 4i);
                    var _v11_2: f32 = 0.0f;
                    if ((((_n0 + _x_2) < _nN2) && ((((_kt + 1i) * 8i) + _k_2) < _nK3))) {
                        let u_j_2: i32 = (_n0 + _x_2);
                        let u_k_1_2: i32 = (((_kt + 1i) * 8i) + _k_2);
                        _v11_2 = u_B[((u_k_1_2 * u_B_d1) + u_j_2)];
                    }
                    _regn_2 = _v11_2;
                    let _x_3: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_3: i32 = (zyn_tdiv(zyn_thread, 128i) + 6i);
                    var _v11_3: f32 = 0.0f;
                    if ((((_n0 + _x_3) < _nN2) && ((((_kt + 1i) * 8i) + _k_3) < _nK3))) {
                        let u_j_3: i32 = (_n0 + _x_3);
                        let u_k_1_3: i32 = (((_kt + 1i) * 8i) + _k_3);
                        _v11_3 = u_B[((u_k_1_3 * u_B_d1) + u_j_3)];
                    }
                    _regn_3 = _v11_3;
                }
            }
            for (var _kk: i32 = 0i; _kk < 8i; _kk++) {
                _a[0i] = _shm[(((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_ty * 4i))];
                _a[1i] = _shm[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_ty * 4i)) + 1i)];
                _a[2i] = _shm[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_ty * 4i)) + 2i)];
                _a[3i] = _shm[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_ty * 4i)) + 3i)];
                _a[4i] = _shm[(((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_ty * 4i)))];
                _a[(4i + 1i)] = _shm[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_ty * 4i))) + 1i)];
                _a[(4i + 2i)] = _shm[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_ty * 4i))) + 2i)];
                _a[(4i + 3i)] = _shm[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_ty * 4i))) + 3i)];
                _b[0i] = _shn[(((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_tx * 4i))];
                _b[1i] = _shn[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_tx * 4i)) + 1i)];
                _b[2i] = _shn[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_tx * 4i)) + 2i)];
                _b[3i] = _shn[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (_tx * 4i)) + 3i)];
                _b[4i] = _shn[(((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_tx * 4i)))];
                _b[(4i + 1i)] = _shn[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_tx * 4i))) + 1i)];
                _b[(4i + 2i)] = _shn[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_tx * 4i))) + 2i)];
                _b[(4i + 3i)] = _shn[((((zyn_trem(_kt, 2i) * 1024i) + (_kk * 128i)) + (64i + (_tx * 4i))) + 3i)];
                {
                    {
                        _acc[0i] = (_acc[0i] + (_a[0i] * _b[0i]));
                        _acc[1i] = (_acc[1i] + (_a[0i] * _b[1i]));
                        _acc[2i] = (_acc[2i] + (_a[0i] * _b[2i]));
                        _acc[3i] = (_acc[3i] + (_a[0i] * _b[3i]));
                        _acc[4i] = (_acc[4i] + (_a[0i] * _b[4i]));
                        _acc[5i] = (_acc[5i] + (_a[0i] * _b[5i]));
                        _acc[6i] = (_acc[6i] + (_a[0i] * _b[6i]));
                        _acc[7i] = (_acc[7i] + (_a[0i] * _b[7i]));
                    }
                    {
                        _acc[8i] = (_acc[8i] + (_a[1i] * _b[0i]));
                        _acc[9i] = (_acc[9i] + (_a[1i] * _b[1i]));
                        _acc[10i] = (_acc[10i] + (_a[1i] * _b[2i]));
                        _acc[11i] = (_acc[11i] + (_a[1i] * _b[3i]));
                        _acc[12i] = (_acc[12i] + (_a[1i] * _b[4i]));
                        _acc[13i] = (_acc[13i] + (_a[1i] * _b[5i]));
                        _acc[14i] = (_acc[14i] + (_a[1i] * _b[6i]));
                        _acc[15i] = (_acc[15i] + (_a[1i] * _b[7i]));
                    }
                    {
                        _acc[16i] = (_acc[16i] + (_a[2i] * _b[0i]));
                        _acc[17i] = (_acc[17i] + (_a[2i] * _b[1i]));
                        _acc[18i] = (_acc[18i] + (_a[2i] * _b[2i]));
                        _acc[19i] = (_acc[19i] + (_a[2i] * _b[3i]));
                        _acc[20i] = (_acc[20i] + (_a[2i] * _b[4i]));
                        _acc[21i] = (_acc[21i] + (_a[2i] * _b[5i]));
                        _acc[22i] = (_acc[22i] + (_a[2i] * _b[6i]));
                        _acc[23i] = (_acc[23i] + (_a[2i] * _b[7i]));
                    }
                    {
                        _acc[24i] = (_acc[24i] + (_a[3i] * _b[0i]));
                        _acc[25i] = (_acc[25i] + (_a[3i] * _b[1i]));
                        _acc[26i] = (_acc[26i] + (_a[3i] * _b[2i]));
                        _acc[27i] = (_acc[27i] + (_a[3i] * _b[3i]));
                        _acc[28i] = (_acc[28i] + (_a[3i] * _b[4i]));
                        _acc[29i] = (_acc[29i] + (_a[3i] * _b[5i]));
                        _acc[30i] = (_acc[30i] + (_a[3i] * _b[6i]));
                        _acc[31i] = (_acc[31i] + (_a[3i] * _b[7i]));
                    }
                    {
                        _acc[32i] = (_acc[32i] + (_a[4i] * _b[0i]));
                        _acc[33i] = (_acc[33i] + (_a[4i] * _b[1i]));
                        _acc[34i] = (_acc[34i] + (_a[4i] * _b[2i]));
                        _acc[35i] = (_acc[35i] + (_a[4i] * _b[3i]));
                        _acc[36i] = (_acc[36i] + (_a[4i] * _b[4i]));
                        _acc[37i] = (_acc[37i] + (_a[4i] * _b[5i]));
                        _acc[38i] = (_acc[38i] + (_a[4i] * _b[6i]));
                        _acc[39i] = (_acc[39i] + (_a[4i] * _b[7i]));
                    }
                    {
                        _acc[40i] = (_acc[40i] + (_a[5i] * _b[0i]));
                        _acc[41i] = (_acc[41i] + (_a[5i] * _b[1i]));
                        _acc[42i] = (_acc[42i] + (_a[5i] * _b[2i]));
                        _acc[43i] = (_acc[43i] + (_a[5i] * _b[3i]));
                        _acc[44i] = (_acc[44i] + (_a[5i] * _b[4i]));
                        _acc[45i] = (_acc[45i] + (_a[5i] * _b[5i]));
                        _acc[46i] = (_acc[46i] + (_a[5i] * _b[6i]));
                        _acc[47i] = (_acc[47i] + (_a[5i] * _b[7i]));
                    }
                    {
                        _acc[48i] = (_acc[48i] + (_a[6i] * _b[0i]));
                        _acc[49i] = (_acc[49i] + (_a[6i] * _b[1i]));
                        _acc[50i] = (_acc[50i] + (_a[6i] * _b[2i]));
                        _acc[51i] = (_acc[51i] + (_a[6i] * _b[3i]));
                        _acc[52i] = (_acc[52i] + (_a[6i] * _b[4i]));
                        _acc[53i] = (_acc[53i] + (_a[6i] * _b[5i]));
                        _acc[54i] = (_acc[54i] + (_a[6i] * _b[6i]));
                        _acc[55i] = (_acc[55i] + (_a[6i] * _b[7i]));
                    }
                    {
                        _acc[56i] = (_acc[56i] + (_a[7i] * _b[0i]));
                        _acc[57i] = (_acc[57i] + (_a[7i] * _b[1i]));
                        _acc[58i] = (_acc[58i] + (_a[7i] * _b[2i]));
                        _acc[59i] = (_acc[59i] + (_a[7i] * _b[3i]));
                        _acc[60i] = (_acc[60i] + (_a[7i] * _b[4i]));
                        _acc[61i] = (_acc[61i] + (_a[7i] * _b[5i]));
                        _acc[62i] = (_acc[62i] + (_a[7i] * _b[6i]));
                        _acc[63i] = (_acc[63i] + (_a[7i] * _b[7i]));
                    }
                }
            }
            if (((_kt + 1i) < _nk7)) {
                {
                    let _x_0: i32 = zyn_tdiv(zyn_thread, 8i);
                    let _k_0: i32 = zyn_trem(zyn_thread, 8i);
                    _shm[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_0 * 128i) + _x_0))] = _regm_0;
                    let _x_1: i32 = (zyn_tdiv(zyn_thread, 8i) + 32i);
                    let _k_1: i32 = zyn_trem(zyn_thread, 8i);
                    _shm[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_1 * 128i) + _x_1))] = _regm_1;
                    let _x_2: i32 = (zyn_tdiv(zyn_thread, 8i) + 64i);
                    let _k_2: i32 = zyn_trem(zyn_thread, 8i);
                    _shm[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_2 * 128i) + _x_2))] = _regm_2;
                    let _x_3: i32 = (zyn_tdiv(zyn_thread, 8i) + 96i);
                    let _k_3: i32 = zyn_trem(zyn_thread, 8i);
                    _shm[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_3 * 128i) + _x_3))] = _regm_3;
                }
                {
                    let _x_0: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_0: i32 = zyn_tdiv(zyn_thread, 128i);
                    _shn[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_0 * 128i) + _x_0))] = _regn_0;
                    let _x_1: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_1: i32 = (zyn_tdiv(zyn_thread, 128i) + 2i);
                    _shn[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_1 * 128i) + _x_1))] = _regn_1;
                    let _x_2: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_2: i32 = (zyn_tdiv(zyn_thread, 128i) + 4i);
                    _shn[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_2 * 128i) + _x_2))] = _regn_2;
                    let _x_3: i32 = zyn_trem(zyn_thread, 128i);
                    let _k_3: i32 = (zyn_tdiv(zyn_thread, 128i) + 6i);
                    _shn[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k_3 * 128i) + _x_3))] = _regn_3;
                }
            }
            workgroupBarrier();
        }
        {
            {
                // line 8: out[i, j] = sum
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_0_0: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_0_0: f32 = zyn_addz_f32(_acc[0i]);
                    u_out[((u_i_2_0_0 * u_N) + u_j_2_0_0)] = u_sum_0_0;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_0_1: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_0_1: f32 = zyn_addz_f32(_acc[1i]);
                    u_out[((u_i_2_0_1 * u_N) + u_j_2_0_1)] = u_sum_0_1;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_0_2: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_0_2: f32 = zyn_addz_f32(_acc[2i]);
                    u_out[((u_i_2_0_2 * u_N) + u_j_2_0_2)] = u_sum_0_2;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_0_3: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_0_3: f32 = zyn_addz_f32(_acc[3i]);
                    u_out[((u_i_2_0_3 * u_N) + u_j_2_0_3)] = u_sum_0_3;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_0_4: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_0_4: f32 = zyn_addz_f32(_acc[4i]);
                    u_out[((u_i_2_0_4 * u_N) + u_j_2_0_4)] = u_sum_0_4;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_0_5: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_0_5: f32 = zyn_addz_f32(_acc[5i]);
                    u_out[((u_i_2_0_5 * u_N) + u_j_2_0_5)] = u_sum_0_5;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_0_6: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_0_6: f32 = zyn_addz_f32(_acc[6i]);
                    u_out[((u_i_2_0_6 * u_N) + u_j_2_0_6)] = u_sum_0_6;
                }
                if ((((_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_0_7: i32 = (_m0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(0i, 4i))));
                    let u_j_2_0_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_0_7: f32 = zyn_addz_f32(_acc[7i]);
                    u_out[((u_i_2_0_7 * u_N) + u_j_2_0_7)] = u_sum_0_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_1_0: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_1_0: f32 = zyn_addz_f32(_acc[8i]);
                    u_out[((u_i_2_1_0 * u_N) + u_j_2_1_0)] = u_sum_1_0;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_1_1: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_1_1: f32 = zyn_addz_f32(_acc[9i]);
                    u_out[((u_i_2_1_1 * u_N) + u_j_2_1_1)] = u_sum_1_1;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_1_2: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_1_2: f32 = zyn_addz_f32(_acc[10i]);
                    u_out[((u_i_2_1_2 * u_N) + u_j_2_1_2)] = u_sum_1_2;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_1_3: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_1_3: f32 = zyn_addz_f32(_acc[11i]);
                    u_out[((u_i_2_1_3 * u_N) + u_j_2_1_3)] = u_sum_1_3;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_1_4: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_1_4: f32 = zyn_addz_f32(_acc[12i]);
                    u_out[((u_i_2_1_4 * u_N) + u_j_2_1_4)] = u_sum_1_4;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_1_5: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_1_5: f32 = zyn_addz_f32(_acc[13i]);
                    u_out[((u_i_2_1_5 * u_N) + u_j_2_1_5)] = u_sum_1_5;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_1_6: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_1_6: f32 = zyn_addz_f32(_acc[14i]);
                    u_out[((u_i_2_1_6 * u_N) + u_j_2_1_6)] = u_sum_1_6;
                }
                if ((((_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_1_7: i32 = (_m0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(1i, 4i))));
                    let u_j_2_1_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_1_7: f32 = zyn_addz_f32(_acc[15i]);
                    u_out[((u_i_2_1_7 * u_N) + u_j_2_1_7)] = u_sum_1_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_2_0: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_2_0: f32 = zyn_addz_f32(_acc[16i]);
                    u_out[((u_i_2_2_0 * u_N) + u_j_2_2_0)] = u_sum_2_0;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_2_1: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_2_1: f32 = zyn_addz_f32(_acc[17i]);
                    u_out[((u_i_2_2_1 * u_N) + u_j_2_2_1)] = u_sum_2_1;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_2_2: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_2_2: f32 = zyn_addz_f32(_acc[18i]);
                    u_out[((u_i_2_2_2 * u_N) + u_j_2_2_2)] = u_sum_2_2;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_2_3: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_2_3: f32 = zyn_addz_f32(_acc[19i]);
                    u_out[((u_i_2_2_3 * u_N) + u_j_2_2_3)] = u_sum_2_3;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_2_4: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_2_4: f32 = zyn_addz_f32(_acc[20i]);
                    u_out[((u_i_2_2_4 * u_N) + u_j_2_2_4)] = u_sum_2_4;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_2_5: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_2_5: f32 = zyn_addz_f32(_acc[21i]);
                    u_out[((u_i_2_2_5 * u_N) + u_j_2_2_5)] = u_sum_2_5;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_2_6: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_2_6: f32 = zyn_addz_f32(_acc[22i]);
                    u_out[((u_i_2_2_6 * u_N) + u_j_2_2_6)] = u_sum_2_6;
                }
                if ((((_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_2_7: i32 = (_m0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(2i, 4i))));
                    let u_j_2_2_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_2_7: f32 = zyn_addz_f32(_acc[23i]);
                    u_out[((u_i_2_2_7 * u_N) + u_j_2_2_7)] = u_sum_2_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_3_0: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_3_0: f32 = zyn_addz_f32(_acc[24i]);
                    u_out[((u_i_2_3_0 * u_N) + u_j_2_3_0)] = u_sum_3_0;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_3_1: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_3_1: f32 = zyn_addz_f32(_acc[25i]);
                    u_out[((u_i_2_3_1 * u_N) + u_j_2_3_1)] = u_sum_3_1;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_3_2: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_3_2: f32 = zyn_addz_f32(_acc[26i]);
                    u_out[((u_i_2_3_2 * u_N) + u_j_2_3_2)] = u_sum_3_2;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_3_3: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_3_3: f32 = zyn_addz_f32(_acc[27i]);
                    u_out[((u_i_2_3_3 * u_N) + u_j_2_3_3)] = u_sum_3_3;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_3_4: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_3_4: f32 = zyn_addz_f32(_acc[28i]);
                    u_out[((u_i_2_3_4 * u_N) + u_j_2_3_4)] = u_sum_3_4;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_3_5: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_3_5: f32 = zyn_addz_f32(_acc[29i]);
                    u_out[((u_i_2_3_5 * u_N) + u_j_2_3_5)] = u_sum_3_5;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_3_6: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_3_6: f32 = zyn_addz_f32(_acc[30i]);
                    u_out[((u_i_2_3_6 * u_N) + u_j_2_3_6)] = u_sum_3_6;
                }
                if ((((_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_3_7: i32 = (_m0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(3i, 4i))));
                    let u_j_2_3_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_3_7: f32 = zyn_addz_f32(_acc[31i]);
                    u_out[((u_i_2_3_7 * u_N) + u_j_2_3_7)] = u_sum_3_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_4_0: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_4_0: f32 = zyn_addz_f32(_acc[32i]);
                    u_out[((u_i_2_4_0 * u_N) + u_j_2_4_0)] = u_sum_4_0;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_4_1: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_4_1: f32 = zyn_addz_f32(_acc[33i]);
                    u_out[((u_i_2_4_1 * u_N) + u_j_2_4_1)] = u_sum_4_1;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_4_2: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_4_2: f32 = zyn_addz_f32(_acc[34i]);
                    u_out[((u_i_2_4_2 * u_N) + u_j_2_4_2)] = u_sum_4_2;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_4_3: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_4_3: f32 = zyn_addz_f32(_acc[35i]);
                    u_out[((u_i_2_4_3 * u_N) + u_j_2_4_3)] = u_sum_4_3;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_4_4: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_4_4: f32 = zyn_addz_f32(_acc[36i]);
                    u_out[((u_i_2_4_4 * u_N) + u_j_2_4_4)] = u_sum_4_4;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_4_5: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_4_5: f32 = zyn_addz_f32(_acc[37i]);
                    u_out[((u_i_2_4_5 * u_N) + u_j_2_4_5)] = u_sum_4_5;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_4_6: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_4_6: f32 = zyn_addz_f32(_acc[38i]);
                    u_out[((u_i_2_4_6 * u_N) + u_j_2_4_6)] = u_sum_4_6;
                }
                if ((((_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_4_7: i32 = (_m0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(4i, 4i))));
                    let u_j_2_4_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_4_7: f32 = zyn_addz_f32(_acc[39i]);
                    u_out[((u_i_2_4_7 * u_N) + u_j_2_4_7)] = u_sum_4_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_5_0: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_5_0: f32 = zyn_addz_f32(_acc[40i]);
                    u_out[((u_i_2_5_0 * u_N) + u_j_2_5_0)] = u_sum_5_0;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_5_1: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_5_1: f32 = zyn_addz_f32(_acc[41i]);
                    u_out[((u_i_2_5_1 * u_N) + u_j_2_5_1)] = u_sum_5_1;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_5_2: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_5_2: f32 = zyn_addz_f32(_acc[42i]);
                    u_out[((u_i_2_5_2 * u_N) + u_j_2_5_2)] = u_sum_5_2;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_5_3: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_5_3: f32 = zyn_addz_f32(_acc[43i]);
                    u_out[((u_i_2_5_3 * u_N) + u_j_2_5_3)] = u_sum_5_3;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_5_4: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_5_4: f32 = zyn_addz_f32(_acc[44i]);
                    u_out[((u_i_2_5_4 * u_N) + u_j_2_5_4)] = u_sum_5_4;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_5_5: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_5_5: f32 = zyn_addz_f32(_acc[45i]);
                    u_out[((u_i_2_5_5 * u_N) + u_j_2_5_5)] = u_sum_5_5;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_5_6: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_5_6: f32 = zyn_addz_f32(_acc[46i]);
                    u_out[((u_i_2_5_6 * u_N) + u_j_2_5_6)] = u_sum_5_6;
                }
                if ((((_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_5_7: i32 = (_m0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(5i, 4i))));
                    let u_j_2_5_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_5_7: f32 = zyn_addz_f32(_acc[47i]);
                    u_out[((u_i_2_5_7 * u_N) + u_j_2_5_7)] = u_sum_5_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_6_0: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_6_0: f32 = zyn_addz_f32(_acc[48i]);
                    u_out[((u_i_2_6_0 * u_N) + u_j_2_6_0)] = u_sum_6_0;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_6_1: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_6_1: f32 = zyn_addz_f32(_acc[49i]);
                    u_out[((u_i_2_6_1 * u_N) + u_j_2_6_1)] = u_sum_6_1;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_6_2: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_6_2: f32 = zyn_addz_f32(_acc[50i]);
                    u_out[((u_i_2_6_2 * u_N) + u_j_2_6_2)] = u_sum_6_2;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_6_3: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_6_3: f32 = zyn_addz_f32(_acc[51i]);
                    u_out[((u_i_2_6_3 * u_N) + u_j_2_6_3)] = u_sum_6_3;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_6_4: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_6_4: f32 = zyn_addz_f32(_acc[52i]);
                    u_out[((u_i_2_6_4 * u_N) + u_j_2_6_4)] = u_sum_6_4;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_6_5: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_6_5: f32 = zyn_addz_f32(_acc[53i]);
                    u_out[((u_i_2_6_5 * u_N) + u_j_2_6_5)] = u_sum_6_5;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_6_6: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_6_6: f32 = zyn_addz_f32(_acc[54i]);
                    u_out[((u_i_2_6_6 * u_N) + u_j_2_6_6)] = u_sum_6_6;
                }
                if ((((_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_6_7: i32 = (_m0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(6i, 4i))));
                    let u_j_2_6_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_6_7: f32 = zyn_addz_f32(_acc[55i]);
                    u_out[((u_i_2_6_7 * u_N) + u_j_2_6_7)] = u_sum_6_7;
                }
            }
            {
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i)))) < _nN2))) {
                    let u_i_2_7_0: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_0: i32 = (_n0 + ((zyn_tdiv(0i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(0i, 4i))));
                    let u_sum_7_0: f32 = zyn_addz_f32(_acc[56i]);
                    u_out[((u_i_2_7_0 * u_N) + u_j_2_7_0)] = u_sum_7_0;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i)))) < _nN2))) {
                    let u_i_2_7_1: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_1: i32 = (_n0 + ((zyn_tdiv(1i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(1i, 4i))));
                    let u_sum_7_1: f32 = zyn_addz_f32(_acc[57i]);
                    u_out[((u_i_2_7_1 * u_N) + u_j_2_7_1)] = u_sum_7_1;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i)))) < _nN2))) {
                    let u_i_2_7_2: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_2: i32 = (_n0 + ((zyn_tdiv(2i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(2i, 4i))));
                    let u_sum_7_2: f32 = zyn_addz_f32(_acc[58i]);
                    u_out[((u_i_2_7_2 * u_N) + u_j_2_7_2)] = u_sum_7_2;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i)))) < _nN2))) {
                    let u_i_2_7_3: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_3: i32 = (_n0 + ((zyn_tdiv(3i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(3i, 4i))));
                    let u_sum_7_3: f32 = zyn_addz_f32(_acc[59i]);
                    u_out[((u_i_2_7_3 * u_N) + u_j_2_7_3)] = u_sum_7_3;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i)))) < _nN2))) {
                    let u_i_2_7_4: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_4: i32 = (_n0 + ((zyn_tdiv(4i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(4i, 4i))));
                    let u_sum_7_4: f32 = zyn_addz_f32(_acc[60i]);
                    u_out[((u_i_2_7_4 * u_N) + u_j_2_7_4)] = u_sum_7_4;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i)))) < _nN2))) {
                    let u_i_2_7_5: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_5: i32 = (_n0 + ((zyn_tdiv(5i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(5i, 4i))));
                    let u_sum_7_5: f32 = zyn_addz_f32(_acc[61i]);
                    u_out[((u_i_2_7_5 * u_N) + u_j_2_7_5)] = u_sum_7_5;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i)))) < _nN2))) {
                    let u_i_2_7_6: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_6: i32 = (_n0 + ((zyn_tdiv(6i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(6i, 4i))));
                    let u_sum_7_6: f32 = zyn_addz_f32(_acc[62i]);
                    u_out[((u_i_2_7_6 * u_N) + u_j_2_7_6)] = u_sum_7_6;
                }
                if ((((_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i)))) < _nN2))) {
                    let u_i_2_7_7: i32 = (_m0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_ty * 4i) + zyn_trem(7i, 4i))));
                    let u_j_2_7_7: i32 = (_n0 + ((zyn_tdiv(7i, 4i) * 64i) + ((_tx * 4i) + zyn_trem(7i, 4i))));
                    let u_sum_7_7: f32 = zyn_addz_f32(_acc[63i]);
                    u_out[((u_i_2_7_7 * u_N) + u_j_2_7_7)] = u_sum_7_7;
                }
            }
        }
    }
}

