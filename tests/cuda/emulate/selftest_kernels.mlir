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
}
