; Conversions LLVM's x86 backend may lower bf16 code to as library calls
; (GCC 12's libgcc lacks them): linked into every host kernel library by
; host_kernels.py, hidden so that each library uses its own.

; float -> bfloat, round to nearest even; NaN stays NaN (quiet).
define hidden bfloat @__truncsfbf2(float %x) {
  %bits = bitcast float %x to i32
  %abs = and i32 %bits, 2147483647
  %nan = icmp ugt i32 %abs, 2139095040
  %lsb.shifted = lshr i32 %bits, 16
  %lsb = and i32 %lsb.shifted, 1
  %bias = add i32 %lsb, 32767
  %rounded = add i32 %bits, %bias
  %quiet = or i32 %bits, 4194304
  %chosen = select i1 %nan, i32 %quiet, i32 %rounded
  %high = lshr i32 %chosen, 16
  %half = trunc i32 %high to i16
  %result = bitcast i16 %half to bfloat
  ret bfloat %result
}

; bfloat -> float: exact (the high half of the float).
define hidden float @__extendbfsf2(bfloat %x) {
  %half = bitcast bfloat %x to i16
  %wide = zext i16 %half to i32
  %bits = shl i32 %wide, 16
  %result = bitcast i32 %bits to float
  ret float %result
}
