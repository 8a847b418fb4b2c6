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

// launch tc_kernel_0: grid [1, 2] block [16, 8]

extern "C" __global__ void __launch_bounds__(128) tc_kernel_0(const float *__restrict__ t_I, const float *__restrict__ t_W1, const float *__restrict__ t_B1, float *__restrict__ t_O1, int *__restrict__ tc_code, int64_t *__restrict__ tc_value, const int check) {
  const int tc_tx = (int)threadIdx.x;
  const int tc_ty = (int)threadIdx.y;
  const int tc_bx = (int)blockIdx.x;
  const int tc_by = (int)blockIdx.y;
  (void)tc_code; (void)tc_value; (void)check;
  __shared__ float tc_sh0_0[16];
  __shared__ float tc_sh1_0[2000];
  __shared__ float tc_sh1_1[4000];
  for (int c0 = tc_by * 8; c0 <= 15; c0 += 2 * 8) {
    {
      const int tc_tid = tc_ty * 16 + tc_tx;
      // shared tile tc_sh0_0: B1[16] (reused)
      const int tc_sh0_0_o0 = 0;
      for (int tc_i = tc_tid; tc_i < 16; tc_i += 128) {
        const int tc_g0 = tc_sh0_0_o0 + tc_i;
        if (tc_g0 >= 0 && tc_g0 < 16) tc_sh0_0[tc_i] = t_B1[(int64_t)(tc_g0)];
      }
      __syncthreads();
      for (int c2 = tc_ty * 1; c2 <= 7; c2 += 8 * 1) {
        for (int c3 = tc_tx * 1; c3 <= 15; c3 += 16 * 1) {
          t_O1[((int64_t)(c0 + c2) * 16 + (int64_t)(c3))] = ((float)(tc_sh0_0[((int)(((int32_t)(c3))) - tc_sh0_0_o0)]));
        }
      }
    }
    {
      const int tc_tid = tc_ty * 16 + tc_tx;
      // shared tile tc_sh1_0: I[8][250] (reused, not coalesced)
      const int tc_sh1_0_o0 = c0;
      const int tc_sh1_0_o1 = 0;
      for (int tc_i = tc_tid; tc_i < 2000; tc_i += 128) {
        const int tc_g0 = tc_sh1_0_o0 + tc_i / 250;
        const int tc_g1 = tc_sh1_0_o1 + tc_i % 250;
        if (tc_g0 >= 0 && tc_g0 < 16 && tc_g1 >= 0 && tc_g1 < 250) tc_sh1_0[tc_i] = t_I[((int64_t)(tc_g0) * 250 + (int64_t)(tc_g1))];
      }
      // shared tile tc_sh1_1: W1[250][16] (reused)
      const int tc_sh1_1_o0 = 0;
      const int tc_sh1_1_o1 = 0;
      for (int tc_i = tc_tid; tc_i < 4000; tc_i += 128) {
        const int tc_g0 = tc_sh1_1_o0 + tc_i / 16;
        const int tc_g1 = tc_sh1_1_o1 + tc_i % 16;
        if (tc_g0 >= 0 && tc_g0 < 250 && tc_g1 >= 0 && tc_g1 < 16) tc_sh1_1[tc_i] = t_W1[((int64_t)(tc_g0) * 16 + (int64_t)(tc_g1))];
      }
      __syncthreads();
      for (int c2 = tc_ty * 1; c2 <= 7; c2 += 8 * 1) {
        for (int c3 = tc_tx * 1; c3 <= 15; c3 += 16 * 1) {
          {
            float acc = (float)t_O1[((int64_t)(c0 + c2) * 16 + (int64_t)(c3))];
            // acc: the thread's output element in a register
            for (int c4 = 0; c4 <= 249; c4 += 1)
              acc = (acc + (float)(((float)(tc_sh1_0[(((int)(((int32_t)(c0 + c2))) - tc_sh1_0_o0) * 250 + ((int)(((int32_t)(c4))) - tc_sh1_0_o1))]) * (float)(tc_sh1_1[(((int)(((int32_t)(c4))) - tc_sh1_1_o0) * 16 + ((int)(((int32_t)(c3))) - tc_sh1_1_o1))]))));
            t_O1[((int64_t)(c0 + c2) * 16 + (int64_t)(c3))] = ((float)(acc));
          }
        }
      }
    }
    for (int c2 = tc_ty * 1; c2 <= 7; c2 += 8 * 1) {
      for (int c3 = tc_tx * 1; c3 <= 15; c3 += 16 * 1) {
        t_O1[((int64_t)(c0 + c2) * 16 + (int64_t)(c3))] = ((float)(tc_fmaxf((float)(t_O1[((int64_t)(((int32_t)(c0 + c2))) * 16 + (int64_t)(((int32_t)(c3))))]), (float)(((int32_t)(0))))));
      }
    }
  }
}
