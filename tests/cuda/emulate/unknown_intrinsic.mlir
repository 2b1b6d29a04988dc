// A kernel with an NVVM intrinsic the emulator does not implement (a warp
// vote): host_kernels.py must refuse it, naming the intrinsic (CTest
// host-kernels-names-unknown-intrinsics).
module attributes {gpu.container_module} {
  gpu.module @emu_test_vote [#nvvm.target<chip = "sm_90">] {
    llvm.func @emu_test_vote(%out: !llvm.ptr {llvm.noalias}) attributes {gpu.kernel, nvvm.kernel} {
      %full = llvm.mlir.constant(-1 : i32) : i32
      %true = llvm.mlir.constant(true) : i1
      %ballot = nvvm.vote.ballot.sync %full, %true : i32
      llvm.store %ballot, %out : i32, !llvm.ptr
      llvm.return
    }
  }
}
