#include <stdint.h>
#include <math.h>
#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))
static __device__ __forceinline__ int8_t tc_div_int8(int8_t a, int8_t b) { if (b == 0) return 0; if (b == -1) return (int8_t)((uint8_t)0 - (uint8_t)a); int8_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static __device__ __forceinline__ int8_t tc_mod_int8(int8_t a, int8_t b) { if (b == 0 || b == -1) return 0; int8_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static __device__ __forceinline__ int16_t tc_div_int16(int16_t a, int16_t b) { if (b == 0) return 0; if (b == -1) return (int16_t)((uint16_t)0 - (uint16_t)a); int16_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static __device__ __forceinline__ int16_t tc_mod_int16(int16_t a, int16_t b) { if (b == 0 || b == -1) return 0; int16_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static __device__ __forceinline__ int32_t tc_div_int32(int32_t a, int32_t b) { if (b == 0) return 0; if (b == -1) return (int32_t)((uint32_t)0 - (uint32_t)a); int32_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static __device__ __forceinline__ int32_t tc_mod_int32(int32_t a, int32_t b) { if (b == 0 || b == -1) return 0; int32_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static __device__ __forceinline__ int64_t tc_div_int64(int64_t a, int64_t b) { if (b == 0) return 0; if (b == -1) return (int64_t)((uint64_t)0 - (uint64_t)a); int64_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static __device__ __forceinline__ int64_t tc_mod_int64(int64_t a, int64_t b) { if (b == 0 || b == -1) return 0; int64_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static __device__ __forceinline__ uint8_t tc_div_uint8(uint8_t a, uint8_t b) { if (b == 0) return 0; uint8_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static __device__ __forceinline__ uint8_t tc_mod_uint8(uint8_t a, uint8_t b) { if (b == 0) return 0; uint8_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static __device__ __forceinline__ uint16_t tc_div_uint16(uint16_t a, uint16_t b) { if (b == 0) return 0; uint16_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static __device__ __forceinline__ uint16_t tc_mod_uint16(uint16_t a, uint16_t b) { if (b == 0) return 0; uint16_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static __device__ __forceinline__ uint32_t tc_div_uint32(uint32_t a, uint32_t b) { if (b == 0) return 0; uint32_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static __device__ __forceinline__ uint32_t tc_mod_uint32(uint32_t a, uint32_t b) { if (b == 0) return 0; uint32_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static __device__ __forceinline__ uint64_t tc_div_uint64(uint64_t a, uint64_t b) { if (b == 0) return 0; uint64_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static __device__ __forceinline__ uint64_t tc_mod_uint64(uint64_t a, uint64_t b) { if (b == 0) return 0; uint64_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static __device__ __forceinline__ float tc_fmaxf(float a, float b) { return (a > b || b != b) ? a : b; }
static __device__ __forceinline__ float tc_fminf(float a, float b) { return (a < b || b != b) ? a : b; }
static __device__ __forceinline__ float tc_rsqrtf(float x) { return 1 / sqrtf(x); }
static __device__ __forceinline__ float tc_rcbrtf(float x) { return 1 / cbrtf(x); }
static __device__ __forceinline__ float tc_sinpif(float x) { return sinf((float)M_PI * fmodf(x, (float)2)); }
static __device__ __forceinline__ float tc_cospif(float x) { return cosf((float)M_PI * fmodf(x, (float)2)); }
static __device__ __forceinline__ float tc_normcdff(float x) { return (float)0.5 * erfcf(-x / sqrtf((float)2)); }
static __device__ __forceinline__ float tc_rhypotf(float a, float b) { return 1 / hypotf(a, b); }
static __device__ __forceinline__ float tc_norm3df(float a, float b, float c) { return sqrtf(a * a + b * b + c * c); }
static __device__ __forceinline__ float tc_rnorm3df(float a, float b, float c) { return 1 / sqrtf(a * a + b * b + c * c); }
static __device__ __forceinline__ float tc_norm4df(float a, float b, float c, float d) { return sqrtf(a * a + b * b + c * c + d * d); }
static __device__ __forceinline__ float tc_rnorm4df(float a, float b, float c, float d) { return 1 / sqrtf(a * a + b * b + c * c + d * d); }
static __device__ __forceinline__ float tc_erfcxf(float x) { if (!(x >= 6)) return expf(x * x) * erfcf(x); float t = x; for (int k = 12; k > 0; k--) t = x + (float)0.5 * (float)k / t; return (float)0.5641895835477563 / t; }
static __device__ __forceinline__ float tc_erfinv_startf(float w) { float p; if (w < 5) { w -= 2.5; p = 2.81022636e-08; p = 3.43273939e-07 + p * w; p = -3.5233877e-06 + p * w; p = -4.39150654e-06 + p * w; p = 0.00021858087 + p * w; p = -0.00125372503 + p * w; p = -0.00417768164 + p * w; p = 0.246640727 + p * w; p = 1.50140941 + p * w; } else { w = sqrtf(w) - 3; p = -0.000200214257; p = 0.000100950558 + p * w; p = 0.00134934322 + p * w; p = -0.00367342844 + p * w; p = 0.00573950773 + p * w; p = -0.0076224613 + p * w; p = 0.00943887047 + p * w; p = 1.00167406 + p * w; p = 2.83297682 + p * w; } return p; }
static __device__ __forceinline__ float tc_erfinv_midf(float x) { float y = tc_erfinv_startf(-logf((1 - x) * (1 + x))) * x; for (int i = 0; i < 2; i++) y -= (erff(y) - x) / ((float)1.1283791670955126 * expf(-y * y)); return y; }
static __device__ __forceinline__ float tc_erfcinv_tailf(float u) { float t = -logf(u), w = -logf(u * (2 - u)); float y = w < 16 ? tc_erfinv_startf(w) * (1 - u) : sqrtf(t - (float)0.5 * logf((float)3.141592653589793 * t)); for (int i = 0; i < 3; i++) { float e = tc_erfcxf(y); y += (logf(e) - y * y + t) * e * (float)0.886226925452758; } return y; }
static __device__ __forceinline__ float tc_erfinvf(float x) { if (x == -1) return -(float)INFINITY; if (x == 1) return (float)INFINITY; if (!(x > -1 && x < 1)) return (float)NAN; return fabsf(x) <= (float)0.5 ? tc_erfinv_midf(x) : copysignf(tc_erfcinv_tailf(1 - fabsf(x)), x); }
static __device__ __forceinline__ float tc_erfcinvf(float x) { if (x == 0) return (float)INFINITY; if (x == 2) return -(float)INFINITY; if (!(x > 0 && x < 2)) return (float)NAN; float u = x > 1 ? 2 - x : x, y = u >= (float)0.5 ? tc_erfinv_midf(1 - u) : tc_erfcinv_tailf(u); return x > 1 ? -y : y; }
static __device__ __forceinline__ float tc_normcdfinvf(float x) { return -(float)1.4142135623730951 * tc_erfcinvf(2 * x); }
static __device__ __forceinline__ int8_t tc_to_int8f(float x) { return x != x ? 0 : x <= -((float)128.0f) ? (int8_t)(-((int8_t)(127)) - 1) : x > -1 && x < 1 ? 0 : x >= ((float)128.0f) ? ((int8_t)(127)) : (int8_t)x; }
static __device__ __forceinline__ int16_t tc_to_int16f(float x) { return x != x ? 0 : x <= -((float)32768.0f) ? (int16_t)(-((int16_t)(32767)) - 1) : x > -1 && x < 1 ? 0 : x >= ((float)32768.0f) ? ((int16_t)(32767)) : (int16_t)x; }
static __device__ __forceinline__ int32_t tc_to_int32f(float x) { return x != x ? 0 : x <= -((float)2147483648.0f) ? (int32_t)(-((int32_t)(2147483647)) - 1) : x > -1 && x < 1 ? 0 : x >= ((float)2147483648.0f) ? ((int32_t)(2147483647)) : (int32_t)x; }
static __device__ __forceinline__ int64_t tc_to_int64f(float x) { return x != x ? 0 : x <= -((float)9.223372036854776e+18f) ? (int64_t)(-((int64_t)INT64_C(9223372036854775807)) - 1) : x > -1 && x < 1 ? 0 : x >= ((float)9.223372036854776e+18f) ? ((int64_t)INT64_C(9223372036854775807)) : (int64_t)x; }
static __device__ __forceinline__ uint8_t tc_to_uint8f(float x) { return x != x ? 0 : x <= 0 ? 0 : x >= ((float)256.0f) ? (uint8_t)-1 : (uint8_t)x; }
static __device__ __forceinline__ uint16_t tc_to_uint16f(float x) { return x != x ? 0 : x <= 0 ? 0 : x >= ((float)65536.0f) ? (uint16_t)-1 : (uint16_t)x; }
static __device__ __forceinline__ uint32_t tc_to_uint32f(float x) { return x != x ? 0 : x <= 0 ? 0 : x >= ((float)4294967296.0f) ? (uint32_t)-1 : (uint32_t)x; }
static __device__ __forceinline__ uint64_t tc_to_uint64f(float x) { return x != x ? 0 : x <= 0 ? 0 : x >= ((float)1.8446744073709552e+19f) ? (uint64_t)-1 : (uint64_t)x; }
static __device__ __forceinline__ int tc_first(int init, int inc, int me, int n) { int r = (me - floord(init, inc)) % n; return init + (r < 0 ? r + n : r) * inc; }
static __device__ __forceinline__ int64_t tc_clamp(int64_t v, int64_t hi) { return v < 0 ? 0 : v > hi ? hi : v; }

// launch tc_kernel_0: grid [1, 2] block [6, 8]
// launch tc_kernel_1: grid [1, 2] block [6, 8]
// launch tc_kernel_2: grid [1] block [16]

extern "C" __global__ void __launch_bounds__(48) tc_kernel_0(const float *__restrict__ t_LUT1, const int32_t *__restrict__ t_I1, const float *__restrict__ t_LUT2, const int32_t *__restrict__ t_I2, float *__restrict__ t_O1, float *__restrict__ t_O2, int *__restrict__ tc_code, int64_t *__restrict__ tc_value, const int check) {
  const int tc_tx = (int)threadIdx.x;
  const int tc_ty = (int)threadIdx.y;
  const int tc_bx = (int)blockIdx.x;
  const int tc_by = (int)blockIdx.y;
  (void)tc_code; (void)tc_value; (void)check;
  for (int c0 = tc_by * 8; c0 <= 15; c0 += 2 * 8) {
    for (int c2 = tc_ty * 1; c2 <= 7; c2 += 8 * 1) {
      for (int c3 = tc_tx * 1; c3 <= 5; c3 += 6 * 1) {
        if (check) { int64_t v;
          if ((v = (int64_t)(t_I1[((int64_t)(((int32_t)(c0 + c2))) * 6 + (int64_t)(((int32_t)(c3))))])) < 0 || v >= 1000) { if (atomicCAS(tc_code, 0, 1) == 0) *tc_value = v; } }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(48) tc_kernel_1(const float *__restrict__ t_LUT1, const int32_t *__restrict__ t_I1, const float *__restrict__ t_LUT2, const int32_t *__restrict__ t_I2, float *__restrict__ t_O1, float *__restrict__ t_O2, int *__restrict__ tc_code, int64_t *__restrict__ tc_value, const int check) {
  const int tc_tx = (int)threadIdx.x;
  const int tc_ty = (int)threadIdx.y;
  const int tc_bx = (int)blockIdx.x;
  const int tc_by = (int)blockIdx.y;
  (void)tc_code; (void)tc_value; (void)check;
  for (int c0 = tc_by * 8; c0 <= 15; c0 += 2 * 8) {
    for (int c2 = tc_ty * 1; c2 <= 7; c2 += 8 * 1) {
      for (int c3 = tc_tx * 1; c3 <= 5; c3 += 6 * 1) {
        if (check) { int64_t v;
          if ((v = (int64_t)(t_I2[((int64_t)(((int32_t)(c0 + c2))) * 6 + (int64_t)(((int32_t)(c3))))])) < 0 || v >= 1000) { if (atomicCAS(tc_code, 0, 2) == 0) *tc_value = v; } }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(16) tc_kernel_2(const float *__restrict__ t_LUT1, const int32_t *__restrict__ t_I1, const float *__restrict__ t_LUT2, const int32_t *__restrict__ t_I2, float *__restrict__ t_O1, float *__restrict__ t_O2, int *__restrict__ tc_code, int64_t *__restrict__ tc_value, const int check) {
  const int tc_tx = (int)threadIdx.x;
  const int tc_bx = (int)blockIdx.x;
  (void)tc_code; (void)tc_value; (void)check;
  __shared__ float tc_sh2_0[128];
  __shared__ float tc_sh2_1[768];
  __shared__ float tc_sh3_0[768];
  __shared__ float tc_sh3_1[128];
  {
    const int tc_tid = tc_tx;
    // shared tile tc_sh2_0: O1[16][8] (reused, not coalesced; written: copied out, not copied in)
    const int tc_sh2_0_o0 = 0;
    const int tc_sh2_0_o1 = 0;
    // shared tile tc_sh2_1: LUT1 rows through I1[16][6][8] (not coalesced)
    const int tc_sh2_1_o0 = 0;
    const int tc_sh2_1_o1 = 0;
    const int tc_sh2_1_o2 = 0;
    for (int tc_i = tc_tid; tc_i < 768; tc_i += 16) {
      const int tc_g0 = tc_sh2_1_o0 + tc_i / 48;
      const int tc_g1 = tc_sh2_1_o1 + (tc_i / 8) % 6;
      const int tc_g2 = tc_sh2_1_o2 + tc_i % 8;
      if (tc_g0 >= 0 && tc_g0 < 16 && tc_g1 >= 0 && tc_g1 < 6 && tc_g2 >= 0 && tc_g2 < 8) tc_sh2_1[tc_i] = t_LUT1[((int64_t)(tc_clamp((int64_t)(t_I1[((int64_t)(tc_g0) * 6 + (int64_t)(tc_g1))]), 999)) * 8 + (int64_t)(tc_g2))];
    }
    __syncthreads();
    for (int c1 = tc_tx * 1; c1 <= 15; c1 += 16 * 1) {
      for (int c2 = 0; c2 <= 7; c2 += 1) {
        { // private: O1 element over 2 statements
          float tc_v;
          tc_v = (float)(0);
          {
            float acc = (float)tc_v;
            // acc: the thread's output element in a register
            for (int c3 = 0; c3 <= 5; c3 += 1)
              acc = (acc + (float)(tc_sh2_1[((((int)(((int32_t)(c1))) - tc_sh2_1_o0) * 6 + ((int)(((int32_t)(c3))) - tc_sh2_1_o1)) * 8 + ((int)(((int32_t)(c2))) - tc_sh2_1_o2))]));
            tc_v = ((float)(acc));
          }
          tc_sh2_0[(((int)(((int32_t)(c1))) - tc_sh2_0_o0) * 8 + ((int)(((int32_t)(c2))) - tc_sh2_0_o1))] = tc_v;
        }
      }
    }
    __syncthreads();
    for (int tc_i = tc_tid; tc_i < 128; tc_i += 16) {
      const int tc_g0 = tc_sh2_0_o0 + tc_i / 8;
      const int tc_g1 = tc_sh2_0_o1 + tc_i % 8;
      if (tc_g0 >= 0 && tc_g0 < 16 && tc_g1 >= 0 && tc_g1 < 8) t_O1[((int64_t)(tc_g0) * 8 + (int64_t)(tc_g1))] = tc_sh2_0[tc_i];
    }
  }
  {
    const int tc_tid = tc_tx;
    // shared tile tc_sh3_0: LUT2 rows through I2[16][6][8] (not coalesced)
    const int tc_sh3_0_o0 = 0;
    const int tc_sh3_0_o1 = 0;
    const int tc_sh3_0_o2 = 0;
    for (int tc_i = tc_tid; tc_i < 768; tc_i += 16) {
      const int tc_g0 = tc_sh3_0_o0 + tc_i / 48;
      const int tc_g1 = tc_sh3_0_o1 + (tc_i / 8) % 6;
      const int tc_g2 = tc_sh3_0_o2 + tc_i % 8;
      if (tc_g0 >= 0 && tc_g0 < 16 && tc_g1 >= 0 && tc_g1 < 6 && tc_g2 >= 0 && tc_g2 < 8) tc_sh3_0[tc_i] = t_LUT2[((int64_t)(tc_clamp((int64_t)(t_I2[((int64_t)(tc_g0) * 6 + (int64_t)(tc_g1))]), 999)) * 8 + (int64_t)(tc_g2))];
    }
    // shared tile tc_sh3_1: O2[16][8] (reused, not coalesced; written: copied out, not copied in)
    const int tc_sh3_1_o0 = 0;
    const int tc_sh3_1_o1 = 0;
    __syncthreads();
    for (int c1 = tc_tx * 1; c1 <= 15; c1 += 16 * 1) {
      for (int c2 = 0; c2 <= 7; c2 += 1) {
        { // private: O2 element over 2 statements
          float tc_v;
          tc_v = (float)(0);
          {
            float acc = (float)tc_v;
            // acc: the thread's output element in a register
            for (int c3 = 0; c3 <= 5; c3 += 1)
              acc = (acc + (float)(tc_sh3_0[((((int)(((int32_t)(c1))) - tc_sh3_0_o0) * 6 + ((int)(((int32_t)(c3))) - tc_sh3_0_o1)) * 8 + ((int)(((int32_t)(c2))) - tc_sh3_0_o2))]));
            tc_v = ((float)(acc));
          }
          tc_sh3_1[(((int)(((int32_t)(c1))) - tc_sh3_1_o0) * 8 + ((int)(((int32_t)(c2))) - tc_sh3_1_o1))] = tc_v;
        }
      }
    }
    __syncthreads();
    for (int tc_i = tc_tid; tc_i < 128; tc_i += 16) {
      const int tc_g0 = tc_sh3_1_o0 + tc_i / 8;
      const int tc_g1 = tc_sh3_1_o1 + tc_i % 8;
      if (tc_g0 >= 0 && tc_g0 < 16 && tc_g1 >= 0 && tc_g1 < 8) t_O2[((int64_t)(tc_g0) * 8 + (int64_t)(tc_g1))] = tc_sh3_1[tc_i];
    }
  }
}
