// Kernels of the emulator's self-test (EmulatorSelfTest.cpp), in the form
// stringc --emit=nvvm writes (one gpu.module per kernel), built for the host
// by host_kernels.py like the generated ones.
module attributes {gpu.container_module} {
  // out[t] = shared[(t + 1) % ntid] after every thread stored its tid there.
  gpu.module @emu_test_barrier [#nvvm.target<chip = "sm_90">] {
    llvm.mlir.global internal @cells() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<256 x f32>
    llvm.func @emu_test_barrier(%out: !llvm.ptr {llvm.noalias}, %n: i64) attributes {gpu.kernel, nvvm.kernel} {
      %one = llvm.mlir.constant(1 : i32) : i32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %ntid = nvvm.read.ptx.sreg.ntid.x : i32
      %shared = llvm.mlir.addressof @cells : !llvm.ptr<3>
      %cells = llvm.addrspacecast %shared : !llvm.ptr<3> to !llvm.ptr
      %mine = llvm.getelementptr %cells[%tid] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      %value = llvm.uitofp %tid : i32 to f32
      llvm.store %value, %mine : f32, !llvm.ptr
      nvvm.barrier0
      %next = llvm.add %tid, %one : i32
      %wrapped = llvm.urem %next, %ntid : i32
      %theirs = llvm.getelementptr %cells[%wrapped] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      %read = llvm.load %theirs : !llvm.ptr -> f32
      %slot = llvm.getelementptr %out[%tid] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      llvm.store %read, %slot : f32, !llvm.ptr
      llvm.return
    }
  }
  // The same without the barrier: some thread reads a cell before its owner
  // wrote it (the emulator poisons shared memory with NaN before a block).
  gpu.module @emu_test_missing_barrier [#nvvm.target<chip = "sm_90">] {
    llvm.mlir.global internal @cells_unsynced() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<256 x f32>
    llvm.func @emu_test_missing_barrier(%out: !llvm.ptr {llvm.noalias}, %n: i64) attributes {gpu.kernel, nvvm.kernel} {
      %one = llvm.mlir.constant(1 : i32) : i32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %ntid = nvvm.read.ptx.sreg.ntid.x : i32
      %shared = llvm.mlir.addressof @cells_unsynced : !llvm.ptr<3>
      %cells = llvm.addrspacecast %shared : !llvm.ptr<3> to !llvm.ptr
      %mine = llvm.getelementptr %cells[%tid] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      %value = llvm.uitofp %tid : i32 to f32
      llvm.store %value, %mine : f32, !llvm.ptr
      %next = llvm.add %tid, %one : i32
      %wrapped = llvm.urem %next, %ntid : i32
      %theirs = llvm.getelementptr %cells[%wrapped] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      %read = llvm.load %theirs : !llvm.ptr -> f32
      %slot = llvm.getelementptr %out[%tid] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      llvm.store %read, %slot : f32, !llvm.ptr
      llvm.return
    }
  }
  // Per thread t (lane l), four results out[4 t + i]: bfly.f32 (xor 1),
  // up.i32 by 1 (clamp 0), down.f32 by 2 with its predicate as +1000 when
  // out of range, idx.i32 from lane 5 within segments of 8.
  gpu.module @emu_test_shuffle [#nvvm.target<chip = "sm_90">] {
    llvm.func @emu_test_shuffle(%out: !llvm.ptr {llvm.noalias}, %n: i64) attributes {gpu.kernel, nvvm.kernel} {
      %full = llvm.mlir.constant(-1 : i32) : i32
      %c0 = llvm.mlir.constant(0 : i32) : i32
      %c1 = llvm.mlir.constant(1 : i32) : i32
      %c2 = llvm.mlir.constant(2 : i32) : i32
      %c4 = llvm.mlir.constant(4 : i32) : i32
      %c5 = llvm.mlir.constant(5 : i32) : i32
      %c31 = llvm.mlir.constant(31 : i32) : i32
      %seg8 = llvm.mlir.constant(6151 : i32) : i32
      %thousand = llvm.mlir.constant(1000.0 : f32) : f32
      %zero = llvm.mlir.constant(0.0 : f32) : f32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %value = llvm.uitofp %tid : i32 to f32
      %base = llvm.mul %tid, %c4 : i32
      %bfly = nvvm.shfl.sync bfly %full, %value, %c1, %c31 : f32 -> f32
      %p0 = llvm.getelementptr %out[%base] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      llvm.store %bfly, %p0 : f32, !llvm.ptr
      %up = nvvm.shfl.sync up %full, %tid, %c1, %c0 : i32 -> i32
      %upf = llvm.uitofp %up : i32 to f32
      %i1 = llvm.add %base, %c1 : i32
      %p1 = llvm.getelementptr %out[%i1] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      llvm.store %upf, %p1 : f32, !llvm.ptr
      %down = nvvm.shfl.sync down %full, %value, %c2, %c31 {return_value_and_is_valid} : f32 -> !llvm.struct<(f32, i1)>
      %downv = llvm.extractvalue %down[0] : !llvm.struct<(f32, i1)>
      %downp = llvm.extractvalue %down[1] : !llvm.struct<(f32, i1)>
      %flag = llvm.select %downp, %zero, %thousand : i1, f32
      %downr = llvm.fadd %downv, %flag : f32
      %i2 = llvm.add %base, %c2 : i32
      %p2 = llvm.getelementptr %out[%i2] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      llvm.store %downr, %p2 : f32, !llvm.ptr
      %idx = nvvm.shfl.sync idx %full, %tid, %c5, %seg8 : i32 -> i32
      %idxf = llvm.uitofp %idx : i32 to f32
      %i3 = llvm.add %i2, %c1 : i32
      %p3 = llvm.getelementptr %out[%i3] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      llvm.store %idxf, %p3 : f32, !llvm.ptr
      llvm.return
    }
  }
  // One m16n8k16 bf16 MMA: lane l reads its fragments a[4 l .. 4 l + 3]
  // (i32), b[2 l, 2 l + 1], c[4 l ..] (f32) and writes d[4 l ..].
  gpu.module @emu_test_mma [#nvvm.target<chip = "sm_90">] {
    llvm.func @emu_test_mma(%d: !llvm.ptr {llvm.noalias}, %a: !llvm.ptr {llvm.noalias}, %b: !llvm.ptr {llvm.noalias}, %c: !llvm.ptr {llvm.noalias}) attributes {gpu.kernel, nvvm.kernel} {
      %c1 = llvm.mlir.constant(1 : i32) : i32
      %c2 = llvm.mlir.constant(2 : i32) : i32
      %c3 = llvm.mlir.constant(3 : i32) : i32
      %c4 = llvm.mlir.constant(4 : i32) : i32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %a4 = llvm.mul %tid, %c4 : i32
      %b2 = llvm.mul %tid, %c2 : i32
      %pa0 = llvm.getelementptr %a[%a4] : (!llvm.ptr, i32) -> !llvm.ptr, i32
      %pa1 = llvm.getelementptr %pa0[1] : (!llvm.ptr) -> !llvm.ptr, i32
      %pa2 = llvm.getelementptr %pa0[2] : (!llvm.ptr) -> !llvm.ptr, i32
      %pa3 = llvm.getelementptr %pa0[3] : (!llvm.ptr) -> !llvm.ptr, i32
      %a0v = llvm.load %pa0 : !llvm.ptr -> i32
      %a1v = llvm.load %pa1 : !llvm.ptr -> i32
      %a2v = llvm.load %pa2 : !llvm.ptr -> i32
      %a3v = llvm.load %pa3 : !llvm.ptr -> i32
      %pb0 = llvm.getelementptr %b[%b2] : (!llvm.ptr, i32) -> !llvm.ptr, i32
      %pb1 = llvm.getelementptr %pb0[1] : (!llvm.ptr) -> !llvm.ptr, i32
      %b0v = llvm.load %pb0 : !llvm.ptr -> i32
      %b1v = llvm.load %pb1 : !llvm.ptr -> i32
      %pc0 = llvm.getelementptr %c[%a4] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      %pc1 = llvm.getelementptr %pc0[1] : (!llvm.ptr) -> !llvm.ptr, f32
      %pc2 = llvm.getelementptr %pc0[2] : (!llvm.ptr) -> !llvm.ptr, f32
      %pc3 = llvm.getelementptr %pc0[3] : (!llvm.ptr) -> !llvm.ptr, f32
      %c0v = llvm.load %pc0 : !llvm.ptr -> f32
      %c1v = llvm.load %pc1 : !llvm.ptr -> f32
      %c2v = llvm.load %pc2 : !llvm.ptr -> f32
      %c3v = llvm.load %pc3 : !llvm.ptr -> f32
      // MLIR 19's nvvm.mma.sync wants f16 vectors for bf16: the intrinsic
      // is called directly, as AttentionMmaKernels.cpp does.
      %r = llvm.call_intrinsic "llvm.nvvm.mma.m16n8k16.row.col.bf16"(%a0v, %a1v, %a2v, %a3v, %b0v, %b1v, %c0v, %c1v, %c2v, %c3v) : (i32, i32, i32, i32, i32, i32, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
      %d0 = llvm.extractvalue %r[0] : !llvm.struct<(f32, f32, f32, f32)>
      %d1 = llvm.extractvalue %r[1] : !llvm.struct<(f32, f32, f32, f32)>
      %d2 = llvm.extractvalue %r[2] : !llvm.struct<(f32, f32, f32, f32)>
      %d3 = llvm.extractvalue %r[3] : !llvm.struct<(f32, f32, f32, f32)>
      %pd0 = llvm.getelementptr %d[%a4] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      %pd1 = llvm.getelementptr %pd0[1] : (!llvm.ptr) -> !llvm.ptr, f32
      %pd2 = llvm.getelementptr %pd0[2] : (!llvm.ptr) -> !llvm.ptr, f32
      %pd3 = llvm.getelementptr %pd0[3] : (!llvm.ptr) -> !llvm.ptr, f32
      llvm.store %d0, %pd0 : f32, !llvm.ptr
      llvm.store %d1, %pd1 : f32, !llvm.ptr
      llvm.store %d2, %pd2 : f32, !llvm.ptr
      llvm.store %d3, %pd3 : f32, !llvm.ptr
      llvm.return
    }
  }
  // ldmatrix: 32 threads copy in[8 t .. 8 t + 7] (i16) into a shared tile of
  // 32 rows of 8 (four 8x8 matrices, row r of matrix m at row 8 m + r), then
  // lane l gives the address of row l and writes its registers of x4, x4.trans,
  // x2 and x1 to out[11 l ..] (4 + 4 + 2 + 1 i32).
  gpu.module @emu_test_ldmatrix [#nvvm.target<chip = "sm_90">] {
    llvm.mlir.global internal @ldm_tile() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<256 x i16>
    llvm.func @emu_test_ldmatrix(%out: !llvm.ptr {llvm.noalias}, %in: !llvm.ptr {llvm.noalias}) attributes {gpu.kernel, nvvm.kernel} {
      %c8 = llvm.mlir.constant(8 : i32) : i32
      %c11 = llvm.mlir.constant(11 : i32) : i32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %tile = llvm.mlir.addressof @ldm_tile : !llvm.ptr<3>
      %row0 = llvm.mul %tid, %c8 : i32
      %src = llvm.getelementptr %in[%row0] : (!llvm.ptr, i32) -> !llvm.ptr, i16
      %row = llvm.getelementptr %tile[%row0] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i16
      %v = llvm.load %src {alignment = 16 : i64} : !llvm.ptr -> vector<8xi16>
      llvm.store %v, %row {alignment = 16 : i64} : vector<8xi16>, !llvm.ptr<3>
      nvvm.barrier0
      %x4 = nvvm.ldmatrix %row {num = 4 : i32, layout = #nvvm.mma_layout<row>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
      %t4 = nvvm.ldmatrix %row {num = 4 : i32, layout = #nvvm.mma_layout<col>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
      %x2 = nvvm.ldmatrix %row {num = 2 : i32, layout = #nvvm.mma_layout<row>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32)>
      %x1 = nvvm.ldmatrix %row {num = 1 : i32, layout = #nvvm.mma_layout<row>} : (!llvm.ptr<3>) -> i32
      %base = llvm.mul %tid, %c11 : i32
      %o = llvm.getelementptr %out[%base] : (!llvm.ptr, i32) -> !llvm.ptr, i32
      %r0 = llvm.extractvalue %x4[0] : !llvm.struct<(i32, i32, i32, i32)>
      %r1 = llvm.extractvalue %x4[1] : !llvm.struct<(i32, i32, i32, i32)>
      %r2 = llvm.extractvalue %x4[2] : !llvm.struct<(i32, i32, i32, i32)>
      %r3 = llvm.extractvalue %x4[3] : !llvm.struct<(i32, i32, i32, i32)>
      %s0 = llvm.extractvalue %t4[0] : !llvm.struct<(i32, i32, i32, i32)>
      %s1 = llvm.extractvalue %t4[1] : !llvm.struct<(i32, i32, i32, i32)>
      %s2 = llvm.extractvalue %t4[2] : !llvm.struct<(i32, i32, i32, i32)>
      %s3 = llvm.extractvalue %t4[3] : !llvm.struct<(i32, i32, i32, i32)>
      %u0 = llvm.extractvalue %x2[0] : !llvm.struct<(i32, i32)>
      %u1 = llvm.extractvalue %x2[1] : !llvm.struct<(i32, i32)>
      %o1 = llvm.getelementptr %o[1] : (!llvm.ptr) -> !llvm.ptr, i32
      %o2 = llvm.getelementptr %o[2] : (!llvm.ptr) -> !llvm.ptr, i32
      %o3 = llvm.getelementptr %o[3] : (!llvm.ptr) -> !llvm.ptr, i32
      %o4 = llvm.getelementptr %o[4] : (!llvm.ptr) -> !llvm.ptr, i32
      %o5 = llvm.getelementptr %o[5] : (!llvm.ptr) -> !llvm.ptr, i32
      %o6 = llvm.getelementptr %o[6] : (!llvm.ptr) -> !llvm.ptr, i32
      %o7 = llvm.getelementptr %o[7] : (!llvm.ptr) -> !llvm.ptr, i32
      %o8 = llvm.getelementptr %o[8] : (!llvm.ptr) -> !llvm.ptr, i32
      %o9 = llvm.getelementptr %o[9] : (!llvm.ptr) -> !llvm.ptr, i32
      %o10 = llvm.getelementptr %o[10] : (!llvm.ptr) -> !llvm.ptr, i32
      llvm.store %r0, %o : i32, !llvm.ptr
      llvm.store %r1, %o1 : i32, !llvm.ptr
      llvm.store %r2, %o2 : i32, !llvm.ptr
      llvm.store %r3, %o3 : i32, !llvm.ptr
      llvm.store %s0, %o4 : i32, !llvm.ptr
      llvm.store %s1, %o5 : i32, !llvm.ptr
      llvm.store %s2, %o6 : i32, !llvm.ptr
      llvm.store %s3, %o7 : i32, !llvm.ptr
      llvm.store %u0, %o8 : i32, !llvm.ptr
      llvm.store %u1, %o9 : i32, !llvm.ptr
      llvm.store %x1, %o10 : i32, !llvm.ptr
      llvm.return
    }
  }
  // cp.async: thread t (of 32) copies 16 bytes in[4 t ..] to tile a and
  // in[128 + 4 t ..] to tile b, each in its own group; after wait_group 1
  // (group a done) it writes out[12 t ..] = a[4 t ..], b[4 t ..] (not copied
  // yet: the poisoned shared memory), then after wait_group 0, b[4 t ..].
  // With %skip_wait != 0 it exits without the last wait (an error).
  gpu.module @emu_test_cp_async [#nvvm.target<chip = "sm_90">] {
    llvm.mlir.global internal @cpa_a() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<128 x i32>
    llvm.mlir.global internal @cpa_b() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<128 x i32>
    llvm.func @emu_test_cp_async(%out: !llvm.ptr {llvm.noalias}, %in: !llvm.ptr {llvm.noalias}, %skip_wait: i64) attributes {gpu.kernel, nvvm.kernel} {
      %c0 = llvm.mlir.constant(0 : i64) : i64
      %c4 = llvm.mlir.constant(4 : i32) : i32
      %c12 = llvm.mlir.constant(12 : i32) : i32
      %c128 = llvm.mlir.constant(128 : i32) : i32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %at = llvm.mul %tid, %c4 : i32
      %a = llvm.mlir.addressof @cpa_a : !llvm.ptr<3>
      %b = llvm.mlir.addressof @cpa_b : !llvm.ptr<3>
      %ga = llvm.addrspacecast %in : !llvm.ptr to !llvm.ptr<1>
      %srcA = llvm.getelementptr %ga[%at] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
      %bt = llvm.add %at, %c128 : i32
      %srcB = llvm.getelementptr %ga[%bt] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i32
      %dstA = llvm.getelementptr %a[%at] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      %dstB = llvm.getelementptr %b[%at] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i32
      nvvm.cp.async.shared.global %dstA, %srcA, 16, cache = ca : !llvm.ptr<3>, !llvm.ptr<1>
      nvvm.cp.async.commit.group
      nvvm.cp.async.shared.global %dstB, %srcB, 16, cache = cg : !llvm.ptr<3>, !llvm.ptr<1>
      nvvm.cp.async.commit.group
      nvvm.cp.async.wait.group 1
      %o0 = llvm.mul %tid, %c12 : i32
      %o = llvm.getelementptr %out[%o0] : (!llvm.ptr, i32) -> !llvm.ptr, i32
      %va = llvm.load %dstA {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
      %vb = llvm.load %dstB {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
      %o4 = llvm.getelementptr %o[4] : (!llvm.ptr) -> !llvm.ptr, i32
      %o8 = llvm.getelementptr %o[8] : (!llvm.ptr) -> !llvm.ptr, i32
      llvm.store %va, %o {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr
      llvm.store %vb, %o4 {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr
      %skip = llvm.icmp "ne" %skip_wait, %c0 : i64
      llvm.cond_br %skip, ^done, ^wait
    ^wait:
      nvvm.cp.async.wait.group 0
      %vb2 = llvm.load %dstB {alignment = 16 : i64} : !llvm.ptr<3> -> vector<4xi32>
      llvm.store %vb2, %o8 {alignment = 16 : i64} : vector<4xi32>, !llvm.ptr
      llvm.br ^done
    ^done:
      llvm.return
    }
  }
  // bits[i] = the bf16 of x[i] (fptrunc, which x86 lowers to __truncsfbf2).
  gpu.module @emu_test_bf16 [#nvvm.target<chip = "sm_90">] {
    llvm.func @emu_test_bf16(%bits: !llvm.ptr {llvm.noalias}, %x: !llvm.ptr {llvm.noalias}, %n: i64) attributes {gpu.kernel, nvvm.kernel} {
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %i = llvm.zext %tid : i32 to i64
      %inside = llvm.icmp "slt" %i, %n : i64
      llvm.cond_br %inside, ^body, ^done
    ^body:
      %px = llvm.getelementptr %x[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      %v = llvm.load %px : !llvm.ptr -> f32
      %h = llvm.fptrunc %v : f32 to bf16
      %hb = llvm.bitcast %h : bf16 to i16
      %po = llvm.getelementptr %bits[%i] : (!llvm.ptr, i64) -> !llvm.ptr, i16
      llvm.store %hb, %po : i16, !llvm.ptr
      llvm.br ^done
    ^done:
      llvm.return
    }
  }
  // out[0] = the i32 at byte offset n of x: misaligned unless n % 4 == 0
  // (a GPU faults; the emulator's alignment check reports it).
  gpu.module @emu_test_misaligned [#nvvm.target<chip = "sm_90">] {
    llvm.func @emu_test_misaligned(%out: !llvm.ptr {llvm.noalias}, %x: !llvm.ptr {llvm.noalias}, %n: i64) attributes {gpu.kernel, nvvm.kernel} {
      %p = llvm.getelementptr %x[%n] : (!llvm.ptr, i64) -> !llvm.ptr, i8
      %v = llvm.load %p {alignment = 4 : i64} : !llvm.ptr -> i32
      llvm.store %v, %out {alignment = 4 : i64} : i32, !llvm.ptr
      llvm.return
    }
  }
  // Threads t >= n return before the barrier the others wait at.
  gpu.module @emu_test_exit_before_barrier [#nvvm.target<chip = "sm_90">] {
    llvm.func @emu_test_exit_before_barrier(%out: !llvm.ptr {llvm.noalias}, %n: i64) attributes {gpu.kernel, nvvm.kernel} {
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %i = llvm.zext %tid : i32 to i64
      %inside = llvm.icmp "slt" %i, %n : i64
      llvm.cond_br %inside, ^body, ^done
    ^body:
      nvvm.barrier0
      %p = llvm.getelementptr %out[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      %one = llvm.mlir.constant(1.0 : f32) : f32
      llvm.store %one, %p : f32, !llvm.ptr
      llvm.br ^done
    ^done:
      llvm.return
    }
  }
  // Lanes t < n shuffle with the full mask while the others wait at a
  // barrier: neither can complete (a deadlock).
  gpu.module @emu_test_deadlock [#nvvm.target<chip = "sm_90">] {
    llvm.func @emu_test_deadlock(%out: !llvm.ptr {llvm.noalias}, %n: i64) attributes {gpu.kernel, nvvm.kernel} {
      %full = llvm.mlir.constant(-1 : i32) : i32
      %c1 = llvm.mlir.constant(1 : i32) : i32
      %c31 = llvm.mlir.constant(31 : i32) : i32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %i = llvm.zext %tid : i32 to i64
      %value = llvm.uitofp %tid : i32 to f32
      %p = llvm.getelementptr %out[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      %low = llvm.icmp "slt" %i, %n : i64
      llvm.cond_br %low, ^shuffle, ^barrier
    ^shuffle:
      %s = nvvm.shfl.sync bfly %full, %value, %c1, %c31 : f32 -> f32
      llvm.store %s, %p : f32, !llvm.ptr
      llvm.br ^done
    ^barrier:
      nvvm.barrier0
      llvm.store %value, %p : f32, !llvm.ptr
      llvm.br ^done
    ^done:
      llvm.return
    }
  }
  // Warp shuffles the lanes of their masks cannot all reach: with %mode 0,
  // lanes t < n shuffle with the full mask and the others with the mask
  // 0xffff0001 (lane 0 and the upper half), which meets lane 0 at the other
  // shuffle (divergent warp collectives); with %mode 1, lanes t < n exit
  // and the others shuffle with the full mask, waiting for lanes that exited.
  // out[t] = the value of lane t ^ 1 where the shuffle completes.
  gpu.module @emu_test_divergent_warp [#nvvm.target<chip = "sm_90">] {
    llvm.func @emu_test_divergent_warp(%out: !llvm.ptr {llvm.noalias}, %n: i64, %mode: i64) attributes {gpu.kernel, nvvm.kernel} {
      %full = llvm.mlir.constant(-1 : i32) : i32
      %part = llvm.mlir.constant(-65535 : i32) : i32
      %zero = llvm.mlir.constant(0 : i64) : i64
      %c1 = llvm.mlir.constant(1 : i32) : i32
      %c31 = llvm.mlir.constant(31 : i32) : i32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %i = llvm.zext %tid : i32 to i64
      %value = llvm.uitofp %tid : i32 to f32
      %p = llvm.getelementptr %out[%i] : (!llvm.ptr, i64) -> !llvm.ptr, f32
      %low = llvm.icmp "slt" %i, %n : i64
      %divergent = llvm.icmp "eq" %mode, %zero : i64
      llvm.cond_br %low, ^low, ^high
    ^low:
      llvm.cond_br %divergent, ^full, ^done
    ^high:
      llvm.cond_br %divergent, ^part, ^full
    ^full:
      %s = nvvm.shfl.sync bfly %full, %value, %c1, %c31 : f32 -> f32
      llvm.store %s, %p : f32, !llvm.ptr
      llvm.br ^done
    ^part:
      %t = nvvm.shfl.sync bfly %part, %value, %c1, %c31 : f32 -> f32
      llvm.store %t, %p : f32, !llvm.ptr
      llvm.br ^done
    ^done:
      llvm.return
    }
  }
  // Dynamic shared memory (an extern array, as stringc's head-dim-128
  // attention kernels have): thread t stores t at float t and at float
  // 16384 + t (64 KiB in, past static shared memory's 48 KiB); after the
  // barrier out[t] = cell[(t + 1) % ntid] + cell[16384 + t].
  gpu.module @emu_test_dynamic_shared [#nvvm.target<chip = "sm_90">] {
    llvm.mlir.global external @pe_dynamic_shared() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
    llvm.func @emu_test_dynamic_shared(%out: !llvm.ptr {llvm.noalias}, %n: i64) attributes {gpu.kernel, nvvm.kernel} {
      %one = llvm.mlir.constant(1 : i32) : i32
      %far = llvm.mlir.constant(16384 : i32) : i32
      %tid = nvvm.read.ptx.sreg.tid.x : i32
      %ntid = nvvm.read.ptx.sreg.ntid.x : i32
      %shared = llvm.mlir.addressof @pe_dynamic_shared : !llvm.ptr<3>
      %cells = llvm.addrspacecast %shared : !llvm.ptr<3> to !llvm.ptr
      %value = llvm.uitofp %tid : i32 to f32
      %mine = llvm.getelementptr %cells[%tid] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      llvm.store %value, %mine : f32, !llvm.ptr
      %farIndex = llvm.add %tid, %far : i32
      %mineFar = llvm.getelementptr %cells[%farIndex] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      llvm.store %value, %mineFar : f32, !llvm.ptr
      nvvm.barrier0
      %next = llvm.add %tid, %one : i32
      %wrapped = llvm.urem %next, %ntid : i32
      %theirs = llvm.getelementptr %cells[%wrapped] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      %read = llvm.load %theirs : !llvm.ptr -> f32
      %readFar = llvm.load %mineFar : !llvm.ptr -> f32
      %sum = llvm.fadd %read, %readFar : f32
      %slot = llvm.getelementptr %out[%tid] : (!llvm.ptr, i32) -> !llvm.ptr, f32
      llvm.store %sum, %slot : f32, !llvm.ptr
      llvm.return
    }
  }
}
