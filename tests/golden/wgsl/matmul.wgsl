// ZynBook WGSL for kernel `matmul` (contraction as GEMM: every size; 128x128x8 tiles in two shared-memory buffers, 8x8 per thread (gemm: bm=128, bn=128, bk=8, tm=8, tn=8, width=1, mma=False))

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
    var _regm: array<f32, 4>;
    var _regn: array<f32, 4>;
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
        for (var _r14: i32 = 0i; _r14 < 4i; _r14++) {
            let _x: i32 = zyn_tdiv((zyn_thread + (_r14 * 256i)), 8i);
            let _k: i32 = zyn_trem((zyn_thread + (_r14 * 256i)), 8i);
            var _v15: f32 = 0.0f;
            if ((((_m0 + _x) < _nM1) && (_k < _nK3))) {
                let u_i_1: i32 = (_m0 + _x);
                // line 6: for k in 0..K:
                let u_k_2: i32 = _k;
                _v15 = u_A[((u_i_1 * u_A_d1) + u_k_2)];
            }
            _regm[_r14] = _v15;
        }
        for (var _r16: i32 = 0i; _r16 < 4i; _r16++) {
            let _x: i32 = zyn_trem((zyn_thread + (_r16 * 256i)), 128i);
            let _k: i32 = zyn_tdiv((zyn_thread + (_r16 * 256i)), 128i);
            var _v17: f32 = 0.0f;
            if ((((_n0 + _x) < _nN2) && (_k < _nK3))) {
                let u_j_1: i32 = (_n0 + _x);
                let u_k_3: i32 = _k;
                _v17 = u_B[((u_k_3 * u_B_d1) + u_j_1)];
            }
            _regn[_r16] = _v17;
        }
        for (var _r18: i32 = 0i; _r18 < 4i; _r18++) {
            let _x: i32 = zyn_tdiv((zyn_thread + (_r18 * 256i)), 8i);
            let _k: i32 = zyn_trem((zyn_thread + (_r18 * 256i)), 8i);
            _shm[((0i * 1024i) + ((_k * 128i) + _x))] = _regm[_r18];
        }
        for (var _r19: i32 = 0i; _r19 < 4i; _r19++) {
            let _x: i32 = zyn_trem((zyn_thread + (_r19 * 256i)), 128i);
            let _k: i32 = zyn_tdiv((zyn_thread + (_r19 * 256i)), 128i);
            _shn[((0i * 1024i) + ((_k * 128i) + _x))] = _regn[_r19];
        }
        workgroupBarrier();
        for (var _kt: i32 = 0i; _kt < _nk7; _kt++) {
            if (((_kt + 1i) < _nk7)) {
                for (var _r8: i32 = 0i; _r8 < 4i; _r8++) {
                    let _x: i32 = zyn_tdiv((zyn_thread + (_r8 * 256i)), 8i);
                    let _k: i32 = zyn_trem((zyn_thread + (_r8 * 256i)), 8i);
                    var _v9: f32 = 0.0f;
                    if ((((_m0 + _x) < _nM1) && ((((_kt + 1i) * 8i) + _k) < _nK3))) {
                        let u_i: i32 = (_m0 + _x);
                        let u_k: i32 = (((_kt + 1i) * 8i) + _k);
                        _v9 = u_A[((u_i * u_A_d1) + u_k)];
                    }
                    _regm[_r8] = _v9;
                }
                for (var _r10: i32 = 0i; _r10 < 4i; _r10++) {
                    let _x: i32 = zyn_trem((zyn_thread + (_r10 * 256i)), 128i);
                    let _k: i32 = zyn_tdiv((zyn_thread + (_r10 * 256i)), 128i);
                    var _v11: f32 = 0.0f;
                    if ((((_n0 + _x) < _nN2) && ((((_kt + 1i) * 8i) + _k) < _nK3))) {
                        let u_j: i32 = (_n0 + _x);
                        let u_k_1: i32 = (((_kt + 1i) * 8i) + _k);
                        _v11 = u_B[((u_k_1 * u_B_d1) + u_j)];
                    }
                    _regn[_r10] = _v11;
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
                for (var _i: i32 = 0i; _i < 8i; _i++) {
                    for (var _j: i32 = 0i; _j < 8i; _j++) {
                        _acc[((_i * 8i) + _j)] = (_acc[((_i * 8i) + _j)] + (_a[_i] * _b[_j]));
                    }
                }
            }
            if (((_kt + 1i) < _nk7)) {
                for (var _r12: i32 = 0i; _r12 < 4i; _r12++) {
                    let _x: i32 = zyn_tdiv((zyn_thread + (_r12 * 256i)), 8i);
                    let _k: i32 = zyn_trem((zyn_thread + (_r12 * 256i)), 8i);
                    _shm[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k * 128i) + _x))] = _regm[_r12];
                }
                for (var _r13: i32 = 0i; _r13 < 4i; _r13++) {
                    let _x: i32 = zyn_trem((zyn_thread + (_r13 * 256i)), 128i);
                    let _k: i32 = zyn_tdiv((zyn_thread + (_r13 * 256i)), 128i);
                    _shn[((zyn_trem((_kt + 1i), 2i) * 1024i) + ((_k * 128i) + _x))] = _regn[_r13];
                }
            }
            workgroupBarrier();
        }
        for (var _ei: i32 = 0i; _ei < 8i; _ei++) {
            for (var _ej: i32 = 0i; _ej < 8i; _ej++) {
                // line 8: out[i, j] = sum
                if ((((_m0 + ((zyn_tdiv(_ei, 4i) * 64i) + ((_ty * 4i) + zyn_trem(_ei, 4i)))) < _nM1) && ((_n0 + ((zyn_tdiv(_ej, 4i) * 64i) + ((_tx * 4i) + zyn_trem(_ej, 4i)))) < _nN2))) {
                    let u_i_2: i32 = (_m0 + ((zyn_tdiv(_ei, 4i) * 64i) + ((_ty * 4i) + zyn_trem(_ei, 4i))));
                    let u_j_2: i32 = (_n0 + ((zyn_tdiv(_ej, 4i) * 64i) + ((_tx * 4i) + zyn_trem(_ej, 4i))));
                    let u_sum: f32 = (0.0f + _acc[((_ei * 8i) + _ej)]);
                    u_out[((u_i_2 * u_N) + u_j_2)] = u_sum;
                }
            }
        }
    }
}

