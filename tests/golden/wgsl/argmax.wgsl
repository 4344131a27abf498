// ZynBook WGSL for kernel `argmax` (reduce(argmax): min(ceil(total / 1024), 1024) block(s) of 256 thread(s), partials combined in order by a second launch (reduce: layout=whole, threads=256, blocks=0, chunk=0, acc=f32))

struct ZynParams {
    u_data_d0: i32,
    u_len: i32,
}

@group(0) @binding(0) var<storage, read> u_data: array<f32>;
@group(0) @binding(1) var<storage, read_write> u_out: array<i32>;  // i64
@group(0) @binding(2) var<storage, read_write> _part: array<f32>;
@group(0) @binding(3) var<storage, read_write> _parti: array<i32>;
@group(0) @binding(4) var<uniform> zyn_p: ZynParams;

var<workgroup> _rv: array<f32, 256>;
var<workgroup> _ri: array<i32, 256>;

// on the bits: a shader compiler may assume x == x
fn zyn_isnan_f32(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
// signed division and remainder truncating as C, through unsigned ones
fn zyn_tdiv(a: i32, b: i32) -> i32 {
    let q = bitcast<i32>(bitcast<u32>(abs(a)) / bitcast<u32>(abs(b)));
    return select(q, -q, (a < 0i) != (b < 0i)); }

// reduce(argmax): a partial per thread, then per block
@compute @workgroup_size(256)
fn zyn_k_argmax(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
    // the linear workgroup id of a dispatch of up to three dimensions
    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));
    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);
    let zyn_thread: i32 = i32(zyn_lid.x);
    let u_data_d0: i32 = zyn_p.u_data_d0;
    let u_len: i32 = zyn_p.u_len;
    // _rv: workgroup memory, declared above
    // _ri: workgroup memory, declared above
    let _n1: i32 = max(u_len, 0i);
    var _acc: f32 = bitcast<f32>(0xff800000u);
    var _acci: i32 = 2147483647i;
    // line 3: for i in 0..len:
    for (var _g: i32 = ((zyn_block * 256i) + zyn_thread); _g < _n1; _g += (zyn_blocks * 256i)) {
        let u_i: i32 = _g;
        // line 4: yield (data[i], i)
        let _v2: f32 = u_data[u_i];
        let _i3: i32 = u_i;
        if ((select(((!zyn_isnan_f32(_acc)) && (_v2 > _acc)), (!zyn_isnan_f32(_acc)), zyn_isnan_f32(_v2)) || (((_v2 == _acc) || (zyn_isnan_f32(_acc) && zyn_isnan_f32(_v2))) && (_i3 < _acci)))) {
            _acc = _v2;
            _acci = _i3;
        }
    }
    _rv[zyn_thread] = _acc;
    _ri[zyn_thread] = _acci;
    workgroupBarrier();
    if (((zyn_thread < 128i) && ((zyn_thread + 128i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v4: f32 = _rv[(zyn_thread + 128i)];
        let _i5: i32 = _ri[(zyn_thread + 128i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v4 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v4)) || (((_v4 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v4))) && (_i5 < _xi)))) {
            _x = _v4;
            _xi = _i5;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 64i) && ((zyn_thread + 64i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v6: f32 = _rv[(zyn_thread + 64i)];
        let _i7: i32 = _ri[(zyn_thread + 64i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v6 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v6)) || (((_v6 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v6))) && (_i7 < _xi)))) {
            _x = _v6;
            _xi = _i7;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 32i) && ((zyn_thread + 32i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v8: f32 = _rv[(zyn_thread + 32i)];
        let _i9: i32 = _ri[(zyn_thread + 32i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v8 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v8)) || (((_v8 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v8))) && (_i9 < _xi)))) {
            _x = _v8;
            _xi = _i9;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 16i) && ((zyn_thread + 16i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v10: f32 = _rv[(zyn_thread + 16i)];
        let _i11: i32 = _ri[(zyn_thread + 16i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v10 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v10)) || (((_v10 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v10))) && (_i11 < _xi)))) {
            _x = _v10;
            _xi = _i11;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 8i) && ((zyn_thread + 8i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v12: f32 = _rv[(zyn_thread + 8i)];
        let _i13: i32 = _ri[(zyn_thread + 8i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v12 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v12)) || (((_v12 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v12))) && (_i13 < _xi)))) {
            _x = _v12;
            _xi = _i13;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 4i) && ((zyn_thread + 4i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v14: f32 = _rv[(zyn_thread + 4i)];
        let _i15: i32 = _ri[(zyn_thread + 4i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v14 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v14)) || (((_v14 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v14))) && (_i15 < _xi)))) {
            _x = _v14;
            _xi = _i15;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 2i) && ((zyn_thread + 2i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v16: f32 = _rv[(zyn_thread + 2i)];
        let _i17: i32 = _ri[(zyn_thread + 2i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v16 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v16)) || (((_v16 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v16))) && (_i17 < _xi)))) {
            _x = _v16;
            _xi = _i17;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 1i) && ((zyn_thread + 1i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v18: f32 = _rv[(zyn_thread + 1i)];
        let _i19: i32 = _ri[(zyn_thread + 1i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v18 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v18)) || (((_v18 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v18))) && (_i19 < _xi)))) {
            _x = _v18;
            _xi = _i19;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    _acc = _rv[0i];
    _acci = _ri[0i];
    if ((zyn_thread == 0i)) {
        _part[zyn_block] = _acc;
        _parti[zyn_block] = _acci;
    }
}

// the block partials, combined in order
@compute @workgroup_size(256)
fn zyn_k_argmax_final(@builtin(workgroup_id) zyn_wg: vec3<u32>, @builtin(num_workgroups) zyn_nwg: vec3<u32>, @builtin(local_invocation_id) zyn_lid: vec3<u32>) {
    // the linear workgroup id of a dispatch of up to three dimensions
    let zyn_block: i32 = i32(zyn_wg.x + zyn_nwg.x * (zyn_wg.y + zyn_nwg.y * zyn_wg.z));
    let zyn_blocks: i32 = i32(zyn_nwg.x * zyn_nwg.y * zyn_nwg.z);
    let zyn_thread: i32 = i32(zyn_lid.x);
    let u_data_d0: i32 = zyn_p.u_data_d0;
    let u_len: i32 = zyn_p.u_len;
    // _rv: workgroup memory, declared above
    // _ri: workgroup memory, declared above
    var _acc: f32 = bitcast<f32>(0xff800000u);
    var _acci: i32 = 2147483647i;
    for (var _b: i32 = zyn_thread; _b < max(min(zyn_tdiv((max(u_len, 0i) + 1023i), 1024i), 1024i), 1i); _b += 256i) {
        let _v20: f32 = _part[_b];
        let _i21: i32 = _parti[_b];
        if ((select(((!zyn_isnan_f32(_acc)) && (_v20 > _acc)), (!zyn_isnan_f32(_acc)), zyn_isnan_f32(_v20)) || (((_v20 == _acc) || (zyn_isnan_f32(_acc) && zyn_isnan_f32(_v20))) && (_i21 < _acci)))) {
            _acc = _v20;
            _acci = _i21;
        }
    }
    _rv[zyn_thread] = _acc;
    _ri[zyn_thread] = _acci;
    workgroupBarrier();
    if (((zyn_thread < 128i) && ((zyn_thread + 128i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v22: f32 = _rv[(zyn_thread + 128i)];
        let _i23: i32 = _ri[(zyn_thread + 128i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v22 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v22)) || (((_v22 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v22))) && (_i23 < _xi)))) {
            _x = _v22;
            _xi = _i23;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 64i) && ((zyn_thread + 64i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v24: f32 = _rv[(zyn_thread + 64i)];
        let _i25: i32 = _ri[(zyn_thread + 64i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v24 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v24)) || (((_v24 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v24))) && (_i25 < _xi)))) {
            _x = _v24;
            _xi = _i25;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 32i) && ((zyn_thread + 32i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v26: f32 = _rv[(zyn_thread + 32i)];
        let _i27: i32 = _ri[(zyn_thread + 32i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v26 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v26)) || (((_v26 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v26))) && (_i27 < _xi)))) {
            _x = _v26;
            _xi = _i27;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 16i) && ((zyn_thread + 16i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v28: f32 = _rv[(zyn_thread + 16i)];
        let _i29: i32 = _ri[(zyn_thread + 16i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v28 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v28)) || (((_v28 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v28))) && (_i29 < _xi)))) {
            _x = _v28;
            _xi = _i29;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 8i) && ((zyn_thread + 8i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v30: f32 = _rv[(zyn_thread + 8i)];
        let _i31: i32 = _ri[(zyn_thread + 8i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v30 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v30)) || (((_v30 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v30))) && (_i31 < _xi)))) {
            _x = _v30;
            _xi = _i31;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 4i) && ((zyn_thread + 4i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v32: f32 = _rv[(zyn_thread + 4i)];
        let _i33: i32 = _ri[(zyn_thread + 4i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v32 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v32)) || (((_v32 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v32))) && (_i33 < _xi)))) {
            _x = _v32;
            _xi = _i33;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 2i) && ((zyn_thread + 2i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v34: f32 = _rv[(zyn_thread + 2i)];
        let _i35: i32 = _ri[(zyn_thread + 2i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v34 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v34)) || (((_v34 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v34))) && (_i35 < _xi)))) {
            _x = _v34;
            _xi = _i35;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    if (((zyn_thread < 1i) && ((zyn_thread + 1i) < 256i))) {
        var _x: f32 = _rv[zyn_thread];
        var _xi: i32 = _ri[zyn_thread];
        let _v36: f32 = _rv[(zyn_thread + 1i)];
        let _i37: i32 = _ri[(zyn_thread + 1i)];
        if ((select(((!zyn_isnan_f32(_x)) && (_v36 > _x)), (!zyn_isnan_f32(_x)), zyn_isnan_f32(_v36)) || (((_v36 == _x) || (zyn_isnan_f32(_x) && zyn_isnan_f32(_v36))) && (_i37 < _xi)))) {
            _x = _v36;
            _xi = _i37;
        }
        _rv[zyn_thread] = _x;
        _ri[zyn_thread] = _xi;
    }
    workgroupBarrier();
    _acc = _rv[0i];
    _acci = _ri[0i];
    if ((zyn_thread == 0i)) {
        u_out[0i] = _acci;
    }
}

