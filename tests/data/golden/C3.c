#include <stdint.h>
typedef float tc_vf __attribute__((vector_size(64)));
typedef float tc_vfu __attribute__((vector_size(64), aligned(4)));
typedef int tc_vi __attribute__((vector_size(64)));
#if defined(__clang__) || __GNUC__ >= 12
#define TC_SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define TC_SHUFFLE(a, b, ...) __builtin_shuffle(a, b, (tc_vi){__VA_ARGS__})
#endif
static inline float tc_hsum(tc_vf v) { v += TC_SHUFFLE(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7); v += TC_SHUFFLE(v, v, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3); v += TC_SHUFFLE(v, v, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1); v += TC_SHUFFLE(v, v, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0); return v[0]; }
static inline tc_vf tc_vmax(tc_vf a, tc_vf v) { tc_vi m = v > a; return (tc_vf)((m & (tc_vi)v) | (~m & (tc_vi)a)); }
static inline float tc_hmax(tc_vf v) { v = tc_vmax(v, TC_SHUFFLE(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7)); v = tc_vmax(v, TC_SHUFFLE(v, v, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3)); v = tc_vmax(v, TC_SHUFFLE(v, v, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1)); v = tc_vmax(v, TC_SHUFFLE(v, v, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0)); return v[0]; }
static inline tc_vf tc_vmin(tc_vf a, tc_vf v) { tc_vi m = v < a; return (tc_vf)((m & (tc_vi)v) | (~m & (tc_vi)a)); }
static inline float tc_hmin(tc_vf v) { v = tc_vmin(v, TC_SHUFFLE(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7)); v = tc_vmin(v, TC_SHUFFLE(v, v, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3)); v = tc_vmin(v, TC_SHUFFLE(v, v, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1)); v = tc_vmin(v, TC_SHUFFLE(v, v, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0)); return v[0]; }
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))
#define min(x, y) ((x) < (y) ? (x) : (y))
#define max(x, y) ((x) > (y) ? (x) : (y))
static inline float tc_expf(float x) {
  uint32_t u;
  __builtin_memcpy(&u, &x, 4);
  u = u < 0xC2D00000u ? u : 0xC2D00000u;
  int32_t k = (int32_t)u < 0x42B20000 ? (int32_t)u : 0x42B20000;
  float c;
  __builtin_memcpy(&c, &k, 4);
  float t = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = (c - t * 0.693145751953125f) - t * 1.4286068202862268e-6f;
  float p = 1.0f + r * (1.0f + r * (0.49999994040f + r * (0.16666431725f + r * (0.04166800156f + r * (0.00837416295f + r * 0.00138436444f)))));
  int32_t n = (int32_t)t, h = n >> 1, ia = (h + 127) << 23, ib = (n - h + 127) << 23;
  float a, b;
  __builtin_memcpy(&a, &ia, 4);
  __builtin_memcpy(&b, &ib, 4);
  return x != x ? x : p * a * b;
}
#ifdef __AVX512F__
#include <immintrin.h>
static inline tc_vf tc_vexpf(tc_vf x) {
  __m512 c = _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_min_ps(_mm512_set1_ps(89.0f), (__m512)x));
  __m512 t = _mm512_sub_ps(_mm512_fmadd_ps(c, _mm512_set1_ps(1.44269504088896341f), _mm512_set1_ps(12582912.0f)), _mm512_set1_ps(12582912.0f));
  __m512 r = _mm512_fnmadd_ps(t, _mm512_set1_ps(0.693145751953125f), c);
  r = _mm512_fnmadd_ps(t, _mm512_set1_ps(1.4286068202862268e-6f), r);
  __m512 p = _mm512_fmadd_ps(r, _mm512_set1_ps(0.00138436444f), _mm512_set1_ps(0.00837416295f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(0.04166800156f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(0.16666431725f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(0.49999994040f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(1.0f));
  return (tc_vf)_mm512_scalef_ps(p, t);
}
#else
static inline tc_vf tc_vexpf(tc_vf x) {
  for (int l = 0; l < 16; l++) x[l] = tc_expf(x[l]);
  return x;
}
#endif
static inline float tc_erff(float x) {
  float a = fabsf(x);
  a = 3.92f < a ? 3.92f : a;
  float t = a * a;
  float r = a * (1.1283791688178453f + t * (0.18517299222943706f + t * (0.05423659697467068f + t * (0.0038385530569476196f + t * (0.0003762483913926067f + t * (4.594736964420171e-06f + t * (-1.2727623927011322e-08f))))))) / (1.0f + t * (0.4974386918343798f + t * (0.11387837781320044f + t * (0.015428130655140093f + t * (0.001300824033682812f + t * (6.226182104356048e-05f))))));
  return copysignf(1.0f < r ? 1.0f : r, x);
}
static inline float tc_tanhf(float x) {
  float a = fabsf(x);
  float t = a * a;
  float s = a + a * t * (-0.33333332613962424f + t * (0.13333277050695347f + t * (-0.05395573449774894f + t * (0.021749796310497307f + t * (-0.008298633974761278f + t * (0.0022537955613510605f))))));
  float l = 1.0f - 2.0f / (tc_expf(a + a) + 1.0f);
  return copysignf(a < 0.625f ? s : l, x);
}
static inline int8_t tc_div_int8(int8_t a, int8_t b) { if (b == 0) return 0; if (b == -1) return (int8_t)((uint8_t)0 - (uint8_t)a); int8_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static inline int8_t tc_mod_int8(int8_t a, int8_t b) { if (b == 0 || b == -1) return 0; int8_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static inline int16_t tc_div_int16(int16_t a, int16_t b) { if (b == 0) return 0; if (b == -1) return (int16_t)((uint16_t)0 - (uint16_t)a); int16_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static inline int16_t tc_mod_int16(int16_t a, int16_t b) { if (b == 0 || b == -1) return 0; int16_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static inline int32_t tc_div_int32(int32_t a, int32_t b) { if (b == 0) return 0; if (b == -1) return (int32_t)((uint32_t)0 - (uint32_t)a); int32_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static inline int32_t tc_mod_int32(int32_t a, int32_t b) { if (b == 0 || b == -1) return 0; int32_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static inline int64_t tc_div_int64(int64_t a, int64_t b) { if (b == 0) return 0; if (b == -1) return (int64_t)((uint64_t)0 - (uint64_t)a); int64_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static inline int64_t tc_mod_int64(int64_t a, int64_t b) { if (b == 0 || b == -1) return 0; int64_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static inline uint8_t tc_div_uint8(uint8_t a, uint8_t b) { if (b == 0) return 0; uint8_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static inline uint8_t tc_mod_uint8(uint8_t a, uint8_t b) { if (b == 0) return 0; uint8_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static inline uint16_t tc_div_uint16(uint16_t a, uint16_t b) { if (b == 0) return 0; uint16_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static inline uint16_t tc_mod_uint16(uint16_t a, uint16_t b) { if (b == 0) return 0; uint16_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static inline uint32_t tc_div_uint32(uint32_t a, uint32_t b) { if (b == 0) return 0; uint32_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static inline uint32_t tc_mod_uint32(uint32_t a, uint32_t b) { if (b == 0) return 0; uint32_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static inline uint64_t tc_div_uint64(uint64_t a, uint64_t b) { if (b == 0) return 0; uint64_t q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }
static inline uint64_t tc_mod_uint64(uint64_t a, uint64_t b) { if (b == 0) return 0; uint64_t r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }
static inline float tc_fmaxf(float a, float b) { return (a > b || b != b) ? a : b; }
static inline float tc_fminf(float a, float b) { return (a < b || b != b) ? a : b; }
static inline float tc_rsqrtf(float x) { return 1 / sqrtf(x); }
static inline float tc_rcbrtf(float x) { return 1 / cbrtf(x); }
static inline float tc_sinpif(float x) { return sinf((float)M_PI * fmodf(x, (float)2)); }
static inline float tc_cospif(float x) { return cosf((float)M_PI * fmodf(x, (float)2)); }
static inline float tc_normcdff(float x) { return (float)0.5 * erfcf(-x / sqrtf((float)2)); }
static inline float tc_rhypotf(float a, float b) { return 1 / hypotf(a, b); }
static inline float tc_norm3df(float a, float b, float c) { return sqrtf(a * a + b * b + c * c); }
static inline float tc_rnorm3df(float a, float b, float c) { return 1 / sqrtf(a * a + b * b + c * c); }
static inline float tc_norm4df(float a, float b, float c, float d) { return sqrtf(a * a + b * b + c * c + d * d); }
static inline float tc_rnorm4df(float a, float b, float c, float d) { return 1 / sqrtf(a * a + b * b + c * c + d * d); }
static inline float tc_erfcxf(float x) { if (!(x >= 6)) return expf(x * x) * erfcf(x); float t = x; for (int k = 12; k > 0; k--) t = x + (float)0.5 * (float)k / t; return (float)0.5641895835477563 / t; }
static inline float tc_erfinv_startf(float w) { float p; if (w < 5) { w -= 2.5; p = 2.81022636e-08; p = 3.43273939e-07 + p * w; p = -3.5233877e-06 + p * w; p = -4.39150654e-06 + p * w; p = 0.00021858087 + p * w; p = -0.00125372503 + p * w; p = -0.00417768164 + p * w; p = 0.246640727 + p * w; p = 1.50140941 + p * w; } else { w = sqrtf(w) - 3; p = -0.000200214257; p = 0.000100950558 + p * w; p = 0.00134934322 + p * w; p = -0.00367342844 + p * w; p = 0.00573950773 + p * w; p = -0.0076224613 + p * w; p = 0.00943887047 + p * w; p = 1.00167406 + p * w; p = 2.83297682 + p * w; } return p; }
static inline float tc_erfinv_midf(float x) { float y = tc_erfinv_startf(-logf((1 - x) * (1 + x))) * x; for (int i = 0; i < 2; i++) y -= (erff(y) - x) / ((float)1.1283791670955126 * expf(-y * y)); return y; }
static inline float tc_erfcinv_tailf(float u) { float t = -logf(u), w = -logf(u * (2 - u)); float y = w < 16 ? tc_erfinv_startf(w) * (1 - u) : sqrtf(t - (float)0.5 * logf((float)3.141592653589793 * t)); for (int i = 0; i < 3; i++) { float e = tc_erfcxf(y); y += (logf(e) - y * y + t) * e * (float)0.886226925452758; } return y; }
static inline float tc_erfinvf(float x) { if (x == -1) return -(float)INFINITY; if (x == 1) return (float)INFINITY; if (!(x > -1 && x < 1)) return (float)NAN; return fabsf(x) <= (float)0.5 ? tc_erfinv_midf(x) : copysignf(tc_erfcinv_tailf(1 - fabsf(x)), x); }
static inline float tc_erfcinvf(float x) { if (x == 0) return (float)INFINITY; if (x == 2) return -(float)INFINITY; if (!(x > 0 && x < 2)) return (float)NAN; float u = x > 1 ? 2 - x : x, y = u >= (float)0.5 ? tc_erfinv_midf(1 - u) : tc_erfcinv_tailf(u); return x > 1 ? -y : y; }
static inline float tc_normcdfinvf(float x) { return -(float)1.4142135623730951 * tc_erfcinvf(2 * x); }
static inline int8_t tc_to_int8f(float x) { return x != x ? 0 : x <= -((float)128.0f) ? (int8_t)(-((int8_t)(127)) - 1) : x > -1 && x < 1 ? 0 : x >= ((float)128.0f) ? ((int8_t)(127)) : (int8_t)x; }
static inline int16_t tc_to_int16f(float x) { return x != x ? 0 : x <= -((float)32768.0f) ? (int16_t)(-((int16_t)(32767)) - 1) : x > -1 && x < 1 ? 0 : x >= ((float)32768.0f) ? ((int16_t)(32767)) : (int16_t)x; }
static inline int32_t tc_to_int32f(float x) { return x != x ? 0 : x <= -((float)2147483648.0f) ? (int32_t)(-((int32_t)(2147483647)) - 1) : x > -1 && x < 1 ? 0 : x >= ((float)2147483648.0f) ? ((int32_t)(2147483647)) : (int32_t)x; }
static inline int64_t tc_to_int64f(float x) { return x != x ? 0 : x <= -((float)9.223372036854776e+18f) ? (int64_t)(-((int64_t)INT64_C(9223372036854775807)) - 1) : x > -1 && x < 1 ? 0 : x >= ((float)9.223372036854776e+18f) ? ((int64_t)INT64_C(9223372036854775807)) : (int64_t)x; }
static inline uint8_t tc_to_uint8f(float x) { return x != x ? 0 : x <= 0 ? 0 : x >= ((float)256.0f) ? (uint8_t)-1 : (uint8_t)x; }
static inline uint16_t tc_to_uint16f(float x) { return x != x ? 0 : x <= 0 ? 0 : x >= ((float)65536.0f) ? (uint16_t)-1 : (uint16_t)x; }
static inline uint32_t tc_to_uint32f(float x) { return x != x ? 0 : x <= 0 ? 0 : x >= ((float)4294967296.0f) ? (uint32_t)-1 : (uint32_t)x; }
static inline uint64_t tc_to_uint64f(float x) { return x != x ? 0 : x <= 0 ? 0 : x >= ((float)1.8446744073709552e+19f) ? (uint64_t)-1 : (uint64_t)x; }
static inline double tc_fmax(double a, double b) { return (a > b || b != b) ? a : b; }
static inline double tc_fmin(double a, double b) { return (a < b || b != b) ? a : b; }
static inline double tc_rsqrt(double x) { return 1 / sqrt(x); }
static inline double tc_rcbrt(double x) { return 1 / cbrt(x); }
static inline double tc_sinpi(double x) { return sin((double)M_PI * fmod(x, (double)2)); }
static inline double tc_cospi(double x) { return cos((double)M_PI * fmod(x, (double)2)); }
static inline double tc_normcdf(double x) { return (double)0.5 * erfc(-x / sqrt((double)2)); }
static inline double tc_rhypot(double a, double b) { return 1 / hypot(a, b); }
static inline double tc_norm3d(double a, double b, double c) { return sqrt(a * a + b * b + c * c); }
static inline double tc_rnorm3d(double a, double b, double c) { return 1 / sqrt(a * a + b * b + c * c); }
static inline double tc_norm4d(double a, double b, double c, double d) { return sqrt(a * a + b * b + c * c + d * d); }
static inline double tc_rnorm4d(double a, double b, double c, double d) { return 1 / sqrt(a * a + b * b + c * c + d * d); }
static inline double tc_erfcx(double x) { if (!(x >= 6)) return exp(x * x) * erfc(x); double t = x; for (int k = 12; k > 0; k--) t = x + (double)0.5 * (double)k / t; return (double)0.5641895835477563 / t; }
static inline double tc_erfinv_start(double w) { double p; if (w < 5) { w -= 2.5; p = 2.81022636e-08; p = 3.43273939e-07 + p * w; p = -3.5233877e-06 + p * w; p = -4.39150654e-06 + p * w; p = 0.00021858087 + p * w; p = -0.00125372503 + p * w; p = -0.00417768164 + p * w; p = 0.246640727 + p * w; p = 1.50140941 + p * w; } else { w = sqrt(w) - 3; p = -0.000200214257; p = 0.000100950558 + p * w; p = 0.00134934322 + p * w; p = -0.00367342844 + p * w; p = 0.00573950773 + p * w; p = -0.0076224613 + p * w; p = 0.00943887047 + p * w; p = 1.00167406 + p * w; p = 2.83297682 + p * w; } return p; }
static inline double tc_erfinv_mid(double x) { double y = tc_erfinv_start(-log((1 - x) * (1 + x))) * x; for (int i = 0; i < 2; i++) y -= (erf(y) - x) / ((double)1.1283791670955126 * exp(-y * y)); return y; }
static inline double tc_erfcinv_tail(double u) { double t = -log(u), w = -log(u * (2 - u)); double y = w < 16 ? tc_erfinv_start(w) * (1 - u) : sqrt(t - (double)0.5 * log((double)3.141592653589793 * t)); for (int i = 0; i < 3; i++) { double e = tc_erfcx(y); y += (log(e) - y * y + t) * e * (double)0.886226925452758; } return y; }
static inline double tc_erfinv(double x) { if (x == -1) return -(double)INFINITY; if (x == 1) return (double)INFINITY; if (!(x > -1 && x < 1)) return (double)NAN; return fabs(x) <= (double)0.5 ? tc_erfinv_mid(x) : copysign(tc_erfcinv_tail(1 - fabs(x)), x); }
static inline double tc_erfcinv(double x) { if (x == 0) return (double)INFINITY; if (x == 2) return -(double)INFINITY; if (!(x > 0 && x < 2)) return (double)NAN; double u = x > 1 ? 2 - x : x, y = u >= (double)0.5 ? tc_erfinv_mid(1 - u) : tc_erfcinv_tail(u); return x > 1 ? -y : y; }
static inline double tc_normcdfinv(double x) { return -(double)1.4142135623730951 * tc_erfcinv(2 * x); }
static inline int8_t tc_to_int8(double x) { return x != x ? 0 : x <= -((double)128.0) ? (int8_t)(-((int8_t)(127)) - 1) : x > -1 && x < 1 ? 0 : x >= ((double)128.0) ? ((int8_t)(127)) : (int8_t)x; }
static inline int16_t tc_to_int16(double x) { return x != x ? 0 : x <= -((double)32768.0) ? (int16_t)(-((int16_t)(32767)) - 1) : x > -1 && x < 1 ? 0 : x >= ((double)32768.0) ? ((int16_t)(32767)) : (int16_t)x; }
static inline int32_t tc_to_int32(double x) { return x != x ? 0 : x <= -((double)2147483648.0) ? (int32_t)(-((int32_t)(2147483647)) - 1) : x > -1 && x < 1 ? 0 : x >= ((double)2147483648.0) ? ((int32_t)(2147483647)) : (int32_t)x; }
static inline int64_t tc_to_int64(double x) { return x != x ? 0 : x <= -((double)9.223372036854776e+18) ? (int64_t)(-((int64_t)INT64_C(9223372036854775807)) - 1) : x > -1 && x < 1 ? 0 : x >= ((double)9.223372036854776e+18) ? ((int64_t)INT64_C(9223372036854775807)) : (int64_t)x; }
static inline uint8_t tc_to_uint8(double x) { return x != x ? 0 : x <= 0 ? 0 : x >= ((double)256.0) ? (uint8_t)-1 : (uint8_t)x; }
static inline uint16_t tc_to_uint16(double x) { return x != x ? 0 : x <= 0 ? 0 : x >= ((double)65536.0) ? (uint16_t)-1 : (uint16_t)x; }
static inline uint32_t tc_to_uint32(double x) { return x != x ? 0 : x <= 0 ? 0 : x >= ((double)4294967296.0) ? (uint32_t)-1 : (uint32_t)x; }
static inline uint64_t tc_to_uint64(double x) { return x != x ? 0 : x <= 0 ? 0 : x >= ((double)1.8446744073709552e+19) ? (uint64_t)-1 : (uint64_t)x; }

int tc_kernel_in(void *const *args, char *scratch, int check, int64_t *err);
const int64_t tc_kernel_scratch_bytes = (int64_t)(0);
int tc_kernel(void *const *args, int check, int64_t *err) {
  size_t bytes = (size_t)tc_kernel_scratch_bytes;
  char *scratch = bytes ? aligned_alloc(64, bytes) : NULL;
  if (bytes && !scratch) return -1;
  int code = tc_kernel_in(args, scratch, check, err);
  free(scratch);
  return code;
}
int tc_phase(int32_t phase, void *const *args, void *const *temps, int64_t lo, int64_t hi, int64_t *err);
#ifdef _OPENMP
int omp_get_num_threads(void);
int omp_get_thread_num(void);
#define TC_THREADS() omp_get_num_threads()
#define TC_THREAD() omp_get_thread_num()
#else
#define TC_THREADS() 1
#define TC_THREAD() 0
#endif
int tc_kernel_in(void *const *args, char *scratch, int check, int64_t *err) {
  const float *restrict t_I = (const float *)args[0];
  const float *restrict t_W = (const float *)args[1];
  float *restrict t_O = (float *)args[2];
  void *const tc_args[] = {(void *)t_I, (void *)t_W, (void *)t_O};
  void *const tc_temps[] = {0};
  (void)tc_args; (void)tc_temps;
  int code = 0;
  #pragma omp parallel reduction(max: code)
  {
    const int64_t _n = TC_THREADS(), _id = TC_THREAD();
    const int64_t _q = (int64_t)(4) / _n, _r = (int64_t)(4) % _n;
    const int64_t _lo = _id * _q + (_id < _r ? _id : _r);
    code = tc_phase(0, tc_args, tc_temps, _lo, _lo + _q + (_id < _r), err);
  }
  if (code) goto done;
done:
  return code;
}

const int32_t tc_abi_version = 1;
const int32_t tc_num_inputs = 2;
const int32_t tc_num_outputs = 1;
const int32_t tc_dtypes[] = {1, 1, 1};
const int32_t tc_ranks[] = {2, 2, 2};
const int64_t tc_dims[] = {16, 125, 128, 125, 16, 128};
const int32_t tc_output_zero[] = {0};
const int32_t tc_num_temps = 0;
const int64_t tc_temp_bytes[] = {0};
const int32_t tc_temp_zero[] = {0};
const int32_t tc_num_phases = 1;
const int64_t tc_phase_trips[] = {4};
const int32_t tc_num_checks = 0;
const char *const tc_check_text[] = {0};

int tc_phase(int32_t phase, void *const *args, void *const *temps, int64_t lo, int64_t hi, int64_t *err) {
  if (phase != 0) return -2;
  const int check = 1;
  (void)check; (void)phase; (void)lo; (void)hi; (void)temps;
  const float *restrict t_I = (const float *)args[0];
  const float *restrict t_W = (const float *)args[1];
  float *restrict t_O = (float *)args[2];
  int code = 0;
  {
    for (int64_t _t = lo; _t < hi; _t++) {
      const int _w = 0 + (int)_t * 1;
      const int b0 = 0 + _w % 4 * 32;
      const int _band = _w / 4 % 1;
      const int a_lo = 0 + _band * 2 / 1 * 12;
      const int a_end = 0 + (_band + 1) * 2 / 1 * 12;
      const int a_hi = a_end < 16 ? a_end : 16;
      float _bp[4000] __attribute__((aligned(64)));
      for (int k0 = 0; k0 < 125; k0 += 125) {
        const int kn = k0 + 125 < 125 ? 125 : 125 - k0;
        int _k = 0;
        for (; _k + 16 <= kn; _k += 16) {
          {
            tc_vf _t0 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 0)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t1 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 1)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t2 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 2)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t3 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 3)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t4 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 4)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t5 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 5)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t6 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 6)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t7 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 7)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t8 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 8)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t9 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 9)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t10 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 10)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t11 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 11)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t12 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 12)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t13 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 13)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t14 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 14)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t15 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 15)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _x1_0 = TC_SHUFFLE(_t0, _t1, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_1 = TC_SHUFFLE(_t0, _t1, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_2 = TC_SHUFFLE(_t2, _t3, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_3 = TC_SHUFFLE(_t2, _t3, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_4 = TC_SHUFFLE(_t4, _t5, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_5 = TC_SHUFFLE(_t4, _t5, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_6 = TC_SHUFFLE(_t6, _t7, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_7 = TC_SHUFFLE(_t6, _t7, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_8 = TC_SHUFFLE(_t8, _t9, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_9 = TC_SHUFFLE(_t8, _t9, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_10 = TC_SHUFFLE(_t10, _t11, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_11 = TC_SHUFFLE(_t10, _t11, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_12 = TC_SHUFFLE(_t12, _t13, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_13 = TC_SHUFFLE(_t12, _t13, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_14 = TC_SHUFFLE(_t14, _t15, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_15 = TC_SHUFFLE(_t14, _t15, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x2_0 = TC_SHUFFLE(_x1_0, _x1_2, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_2 = TC_SHUFFLE(_x1_0, _x1_2, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_1 = TC_SHUFFLE(_x1_1, _x1_3, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_3 = TC_SHUFFLE(_x1_1, _x1_3, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_4 = TC_SHUFFLE(_x1_4, _x1_6, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_6 = TC_SHUFFLE(_x1_4, _x1_6, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_5 = TC_SHUFFLE(_x1_5, _x1_7, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_7 = TC_SHUFFLE(_x1_5, _x1_7, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_8 = TC_SHUFFLE(_x1_8, _x1_10, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_10 = TC_SHUFFLE(_x1_8, _x1_10, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_9 = TC_SHUFFLE(_x1_9, _x1_11, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_11 = TC_SHUFFLE(_x1_9, _x1_11, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_12 = TC_SHUFFLE(_x1_12, _x1_14, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_14 = TC_SHUFFLE(_x1_12, _x1_14, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_13 = TC_SHUFFLE(_x1_13, _x1_15, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_15 = TC_SHUFFLE(_x1_13, _x1_15, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x4_0 = TC_SHUFFLE(_x2_0, _x2_4, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_4 = TC_SHUFFLE(_x2_0, _x2_4, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_1 = TC_SHUFFLE(_x2_1, _x2_5, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_5 = TC_SHUFFLE(_x2_1, _x2_5, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_2 = TC_SHUFFLE(_x2_2, _x2_6, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_6 = TC_SHUFFLE(_x2_2, _x2_6, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_3 = TC_SHUFFLE(_x2_3, _x2_7, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_7 = TC_SHUFFLE(_x2_3, _x2_7, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_8 = TC_SHUFFLE(_x2_8, _x2_12, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_12 = TC_SHUFFLE(_x2_8, _x2_12, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_9 = TC_SHUFFLE(_x2_9, _x2_13, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_13 = TC_SHUFFLE(_x2_9, _x2_13, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_10 = TC_SHUFFLE(_x2_10, _x2_14, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_14 = TC_SHUFFLE(_x2_10, _x2_14, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_11 = TC_SHUFFLE(_x2_11, _x2_15, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_15 = TC_SHUFFLE(_x2_11, _x2_15, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x8_0 = TC_SHUFFLE(_x4_0, _x4_8, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_8 = TC_SHUFFLE(_x4_0, _x4_8, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_1 = TC_SHUFFLE(_x4_1, _x4_9, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_9 = TC_SHUFFLE(_x4_1, _x4_9, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_2 = TC_SHUFFLE(_x4_2, _x4_10, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_10 = TC_SHUFFLE(_x4_2, _x4_10, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_3 = TC_SHUFFLE(_x4_3, _x4_11, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_11 = TC_SHUFFLE(_x4_3, _x4_11, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_4 = TC_SHUFFLE(_x4_4, _x4_12, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_12 = TC_SHUFFLE(_x4_4, _x4_12, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_5 = TC_SHUFFLE(_x4_5, _x4_13, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_13 = TC_SHUFFLE(_x4_5, _x4_13, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_6 = TC_SHUFFLE(_x4_6, _x4_14, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_14 = TC_SHUFFLE(_x4_6, _x4_14, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_7 = TC_SHUFFLE(_x4_7, _x4_15, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_15 = TC_SHUFFLE(_x4_7, _x4_15, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            *(tc_vf *)&_bp[(_k + 0) * 32 + 0] = _x8_0;
            *(tc_vf *)&_bp[(_k + 1) * 32 + 0] = _x8_1;
            *(tc_vf *)&_bp[(_k + 2) * 32 + 0] = _x8_2;
            *(tc_vf *)&_bp[(_k + 3) * 32 + 0] = _x8_3;
            *(tc_vf *)&_bp[(_k + 4) * 32 + 0] = _x8_4;
            *(tc_vf *)&_bp[(_k + 5) * 32 + 0] = _x8_5;
            *(tc_vf *)&_bp[(_k + 6) * 32 + 0] = _x8_6;
            *(tc_vf *)&_bp[(_k + 7) * 32 + 0] = _x8_7;
            *(tc_vf *)&_bp[(_k + 8) * 32 + 0] = _x8_8;
            *(tc_vf *)&_bp[(_k + 9) * 32 + 0] = _x8_9;
            *(tc_vf *)&_bp[(_k + 10) * 32 + 0] = _x8_10;
            *(tc_vf *)&_bp[(_k + 11) * 32 + 0] = _x8_11;
            *(tc_vf *)&_bp[(_k + 12) * 32 + 0] = _x8_12;
            *(tc_vf *)&_bp[(_k + 13) * 32 + 0] = _x8_13;
            *(tc_vf *)&_bp[(_k + 14) * 32 + 0] = _x8_14;
            *(tc_vf *)&_bp[(_k + 15) * 32 + 0] = _x8_15;
          }
          {
            tc_vf _t0 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 16)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t1 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 17)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t2 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 18)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t3 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 19)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t4 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 20)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t5 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 21)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t6 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 22)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t7 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 23)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t8 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 24)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t9 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 25)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t10 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 26)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t11 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 27)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t12 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 28)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t13 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 29)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t14 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 30)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t15 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 31)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _x1_0 = TC_SHUFFLE(_t0, _t1, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_1 = TC_SHUFFLE(_t0, _t1, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_2 = TC_SHUFFLE(_t2, _t3, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_3 = TC_SHUFFLE(_t2, _t3, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_4 = TC_SHUFFLE(_t4, _t5, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_5 = TC_SHUFFLE(_t4, _t5, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_6 = TC_SHUFFLE(_t6, _t7, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_7 = TC_SHUFFLE(_t6, _t7, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_8 = TC_SHUFFLE(_t8, _t9, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_9 = TC_SHUFFLE(_t8, _t9, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_10 = TC_SHUFFLE(_t10, _t11, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_11 = TC_SHUFFLE(_t10, _t11, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_12 = TC_SHUFFLE(_t12, _t13, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_13 = TC_SHUFFLE(_t12, _t13, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_14 = TC_SHUFFLE(_t14, _t15, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_15 = TC_SHUFFLE(_t14, _t15, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x2_0 = TC_SHUFFLE(_x1_0, _x1_2, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_2 = TC_SHUFFLE(_x1_0, _x1_2, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_1 = TC_SHUFFLE(_x1_1, _x1_3, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_3 = TC_SHUFFLE(_x1_1, _x1_3, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_4 = TC_SHUFFLE(_x1_4, _x1_6, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_6 = TC_SHUFFLE(_x1_4, _x1_6, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_5 = TC_SHUFFLE(_x1_5, _x1_7, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_7 = TC_SHUFFLE(_x1_5, _x1_7, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_8 = TC_SHUFFLE(_x1_8, _x1_10, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_10 = TC_SHUFFLE(_x1_8, _x1_10, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_9 = TC_SHUFFLE(_x1_9, _x1_11, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_11 = TC_SHUFFLE(_x1_9, _x1_11, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_12 = TC_SHUFFLE(_x1_12, _x1_14, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_14 = TC_SHUFFLE(_x1_12, _x1_14, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_13 = TC_SHUFFLE(_x1_13, _x1_15, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_15 = TC_SHUFFLE(_x1_13, _x1_15, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x4_0 = TC_SHUFFLE(_x2_0, _x2_4, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_4 = TC_SHUFFLE(_x2_0, _x2_4, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_1 = TC_SHUFFLE(_x2_1, _x2_5, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_5 = TC_SHUFFLE(_x2_1, _x2_5, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_2 = TC_SHUFFLE(_x2_2, _x2_6, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_6 = TC_SHUFFLE(_x2_2, _x2_6, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_3 = TC_SHUFFLE(_x2_3, _x2_7, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_7 = TC_SHUFFLE(_x2_3, _x2_7, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_8 = TC_SHUFFLE(_x2_8, _x2_12, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_12 = TC_SHUFFLE(_x2_8, _x2_12, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_9 = TC_SHUFFLE(_x2_9, _x2_13, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_13 = TC_SHUFFLE(_x2_9, _x2_13, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_10 = TC_SHUFFLE(_x2_10, _x2_14, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_14 = TC_SHUFFLE(_x2_10, _x2_14, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_11 = TC_SHUFFLE(_x2_11, _x2_15, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_15 = TC_SHUFFLE(_x2_11, _x2_15, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x8_0 = TC_SHUFFLE(_x4_0, _x4_8, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_8 = TC_SHUFFLE(_x4_0, _x4_8, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_1 = TC_SHUFFLE(_x4_1, _x4_9, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_9 = TC_SHUFFLE(_x4_1, _x4_9, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_2 = TC_SHUFFLE(_x4_2, _x4_10, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_10 = TC_SHUFFLE(_x4_2, _x4_10, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_3 = TC_SHUFFLE(_x4_3, _x4_11, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_11 = TC_SHUFFLE(_x4_3, _x4_11, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_4 = TC_SHUFFLE(_x4_4, _x4_12, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_12 = TC_SHUFFLE(_x4_4, _x4_12, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_5 = TC_SHUFFLE(_x4_5, _x4_13, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_13 = TC_SHUFFLE(_x4_5, _x4_13, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_6 = TC_SHUFFLE(_x4_6, _x4_14, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_14 = TC_SHUFFLE(_x4_6, _x4_14, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_7 = TC_SHUFFLE(_x4_7, _x4_15, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_15 = TC_SHUFFLE(_x4_7, _x4_15, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            *(tc_vf *)&_bp[(_k + 0) * 32 + 16] = _x8_0;
            *(tc_vf *)&_bp[(_k + 1) * 32 + 16] = _x8_1;
            *(tc_vf *)&_bp[(_k + 2) * 32 + 16] = _x8_2;
            *(tc_vf *)&_bp[(_k + 3) * 32 + 16] = _x8_3;
            *(tc_vf *)&_bp[(_k + 4) * 32 + 16] = _x8_4;
            *(tc_vf *)&_bp[(_k + 5) * 32 + 16] = _x8_5;
            *(tc_vf *)&_bp[(_k + 6) * 32 + 16] = _x8_6;
            *(tc_vf *)&_bp[(_k + 7) * 32 + 16] = _x8_7;
            *(tc_vf *)&_bp[(_k + 8) * 32 + 16] = _x8_8;
            *(tc_vf *)&_bp[(_k + 9) * 32 + 16] = _x8_9;
            *(tc_vf *)&_bp[(_k + 10) * 32 + 16] = _x8_10;
            *(tc_vf *)&_bp[(_k + 11) * 32 + 16] = _x8_11;
            *(tc_vf *)&_bp[(_k + 12) * 32 + 16] = _x8_12;
            *(tc_vf *)&_bp[(_k + 13) * 32 + 16] = _x8_13;
            *(tc_vf *)&_bp[(_k + 14) * 32 + 16] = _x8_14;
            *(tc_vf *)&_bp[(_k + 15) * 32 + 16] = _x8_15;
          }
        }
        if (_k < kn && kn >= 16) {
          _k = kn - 16;
          {
            tc_vf _t0 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 0)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t1 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 1)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t2 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 2)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t3 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 3)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t4 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 4)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t5 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 5)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t6 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 6)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t7 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 7)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t8 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 8)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t9 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 9)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t10 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 10)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t11 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 11)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t12 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 12)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t13 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 13)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t14 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 14)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t15 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 15)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _x1_0 = TC_SHUFFLE(_t0, _t1, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_1 = TC_SHUFFLE(_t0, _t1, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_2 = TC_SHUFFLE(_t2, _t3, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_3 = TC_SHUFFLE(_t2, _t3, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_4 = TC_SHUFFLE(_t4, _t5, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_5 = TC_SHUFFLE(_t4, _t5, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_6 = TC_SHUFFLE(_t6, _t7, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_7 = TC_SHUFFLE(_t6, _t7, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_8 = TC_SHUFFLE(_t8, _t9, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_9 = TC_SHUFFLE(_t8, _t9, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_10 = TC_SHUFFLE(_t10, _t11, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_11 = TC_SHUFFLE(_t10, _t11, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_12 = TC_SHUFFLE(_t12, _t13, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_13 = TC_SHUFFLE(_t12, _t13, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_14 = TC_SHUFFLE(_t14, _t15, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_15 = TC_SHUFFLE(_t14, _t15, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x2_0 = TC_SHUFFLE(_x1_0, _x1_2, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_2 = TC_SHUFFLE(_x1_0, _x1_2, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_1 = TC_SHUFFLE(_x1_1, _x1_3, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_3 = TC_SHUFFLE(_x1_1, _x1_3, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_4 = TC_SHUFFLE(_x1_4, _x1_6, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_6 = TC_SHUFFLE(_x1_4, _x1_6, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_5 = TC_SHUFFLE(_x1_5, _x1_7, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_7 = TC_SHUFFLE(_x1_5, _x1_7, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_8 = TC_SHUFFLE(_x1_8, _x1_10, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_10 = TC_SHUFFLE(_x1_8, _x1_10, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_9 = TC_SHUFFLE(_x1_9, _x1_11, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_11 = TC_SHUFFLE(_x1_9, _x1_11, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_12 = TC_SHUFFLE(_x1_12, _x1_14, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_14 = TC_SHUFFLE(_x1_12, _x1_14, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_13 = TC_SHUFFLE(_x1_13, _x1_15, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_15 = TC_SHUFFLE(_x1_13, _x1_15, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x4_0 = TC_SHUFFLE(_x2_0, _x2_4, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_4 = TC_SHUFFLE(_x2_0, _x2_4, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_1 = TC_SHUFFLE(_x2_1, _x2_5, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_5 = TC_SHUFFLE(_x2_1, _x2_5, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_2 = TC_SHUFFLE(_x2_2, _x2_6, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_6 = TC_SHUFFLE(_x2_2, _x2_6, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_3 = TC_SHUFFLE(_x2_3, _x2_7, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_7 = TC_SHUFFLE(_x2_3, _x2_7, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_8 = TC_SHUFFLE(_x2_8, _x2_12, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_12 = TC_SHUFFLE(_x2_8, _x2_12, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_9 = TC_SHUFFLE(_x2_9, _x2_13, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_13 = TC_SHUFFLE(_x2_9, _x2_13, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_10 = TC_SHUFFLE(_x2_10, _x2_14, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_14 = TC_SHUFFLE(_x2_10, _x2_14, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_11 = TC_SHUFFLE(_x2_11, _x2_15, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_15 = TC_SHUFFLE(_x2_11, _x2_15, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x8_0 = TC_SHUFFLE(_x4_0, _x4_8, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_8 = TC_SHUFFLE(_x4_0, _x4_8, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_1 = TC_SHUFFLE(_x4_1, _x4_9, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_9 = TC_SHUFFLE(_x4_1, _x4_9, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_2 = TC_SHUFFLE(_x4_2, _x4_10, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_10 = TC_SHUFFLE(_x4_2, _x4_10, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_3 = TC_SHUFFLE(_x4_3, _x4_11, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_11 = TC_SHUFFLE(_x4_3, _x4_11, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_4 = TC_SHUFFLE(_x4_4, _x4_12, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_12 = TC_SHUFFLE(_x4_4, _x4_12, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_5 = TC_SHUFFLE(_x4_5, _x4_13, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_13 = TC_SHUFFLE(_x4_5, _x4_13, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_6 = TC_SHUFFLE(_x4_6, _x4_14, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_14 = TC_SHUFFLE(_x4_6, _x4_14, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_7 = TC_SHUFFLE(_x4_7, _x4_15, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_15 = TC_SHUFFLE(_x4_7, _x4_15, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            *(tc_vf *)&_bp[(_k + 0) * 32 + 0] = _x8_0;
            *(tc_vf *)&_bp[(_k + 1) * 32 + 0] = _x8_1;
            *(tc_vf *)&_bp[(_k + 2) * 32 + 0] = _x8_2;
            *(tc_vf *)&_bp[(_k + 3) * 32 + 0] = _x8_3;
            *(tc_vf *)&_bp[(_k + 4) * 32 + 0] = _x8_4;
            *(tc_vf *)&_bp[(_k + 5) * 32 + 0] = _x8_5;
            *(tc_vf *)&_bp[(_k + 6) * 32 + 0] = _x8_6;
            *(tc_vf *)&_bp[(_k + 7) * 32 + 0] = _x8_7;
            *(tc_vf *)&_bp[(_k + 8) * 32 + 0] = _x8_8;
            *(tc_vf *)&_bp[(_k + 9) * 32 + 0] = _x8_9;
            *(tc_vf *)&_bp[(_k + 10) * 32 + 0] = _x8_10;
            *(tc_vf *)&_bp[(_k + 11) * 32 + 0] = _x8_11;
            *(tc_vf *)&_bp[(_k + 12) * 32 + 0] = _x8_12;
            *(tc_vf *)&_bp[(_k + 13) * 32 + 0] = _x8_13;
            *(tc_vf *)&_bp[(_k + 14) * 32 + 0] = _x8_14;
            *(tc_vf *)&_bp[(_k + 15) * 32 + 0] = _x8_15;
          }
          {
            tc_vf _t0 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 16)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t1 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 17)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t2 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 18)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t3 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 19)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t4 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 20)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t5 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 21)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t6 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 22)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t7 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 23)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t8 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 24)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t9 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 25)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t10 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 26)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t11 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 27)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t12 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 28)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t13 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 29)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t14 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 30)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _t15 = *(const tc_vfu *)&t_W[((int64_t)(((int32_t)((b0 + 31)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
            tc_vf _x1_0 = TC_SHUFFLE(_t0, _t1, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_1 = TC_SHUFFLE(_t0, _t1, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_2 = TC_SHUFFLE(_t2, _t3, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_3 = TC_SHUFFLE(_t2, _t3, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_4 = TC_SHUFFLE(_t4, _t5, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_5 = TC_SHUFFLE(_t4, _t5, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_6 = TC_SHUFFLE(_t6, _t7, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_7 = TC_SHUFFLE(_t6, _t7, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_8 = TC_SHUFFLE(_t8, _t9, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_9 = TC_SHUFFLE(_t8, _t9, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_10 = TC_SHUFFLE(_t10, _t11, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_11 = TC_SHUFFLE(_t10, _t11, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_12 = TC_SHUFFLE(_t12, _t13, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_13 = TC_SHUFFLE(_t12, _t13, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x1_14 = TC_SHUFFLE(_t14, _t15, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
            tc_vf _x1_15 = TC_SHUFFLE(_t14, _t15, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
            tc_vf _x2_0 = TC_SHUFFLE(_x1_0, _x1_2, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_2 = TC_SHUFFLE(_x1_0, _x1_2, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_1 = TC_SHUFFLE(_x1_1, _x1_3, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_3 = TC_SHUFFLE(_x1_1, _x1_3, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_4 = TC_SHUFFLE(_x1_4, _x1_6, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_6 = TC_SHUFFLE(_x1_4, _x1_6, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_5 = TC_SHUFFLE(_x1_5, _x1_7, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_7 = TC_SHUFFLE(_x1_5, _x1_7, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_8 = TC_SHUFFLE(_x1_8, _x1_10, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_10 = TC_SHUFFLE(_x1_8, _x1_10, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_9 = TC_SHUFFLE(_x1_9, _x1_11, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_11 = TC_SHUFFLE(_x1_9, _x1_11, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_12 = TC_SHUFFLE(_x1_12, _x1_14, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_14 = TC_SHUFFLE(_x1_12, _x1_14, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x2_13 = TC_SHUFFLE(_x1_13, _x1_15, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
            tc_vf _x2_15 = TC_SHUFFLE(_x1_13, _x1_15, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
            tc_vf _x4_0 = TC_SHUFFLE(_x2_0, _x2_4, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_4 = TC_SHUFFLE(_x2_0, _x2_4, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_1 = TC_SHUFFLE(_x2_1, _x2_5, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_5 = TC_SHUFFLE(_x2_1, _x2_5, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_2 = TC_SHUFFLE(_x2_2, _x2_6, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_6 = TC_SHUFFLE(_x2_2, _x2_6, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_3 = TC_SHUFFLE(_x2_3, _x2_7, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_7 = TC_SHUFFLE(_x2_3, _x2_7, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_8 = TC_SHUFFLE(_x2_8, _x2_12, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_12 = TC_SHUFFLE(_x2_8, _x2_12, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_9 = TC_SHUFFLE(_x2_9, _x2_13, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_13 = TC_SHUFFLE(_x2_9, _x2_13, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_10 = TC_SHUFFLE(_x2_10, _x2_14, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_14 = TC_SHUFFLE(_x2_10, _x2_14, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x4_11 = TC_SHUFFLE(_x2_11, _x2_15, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
            tc_vf _x4_15 = TC_SHUFFLE(_x2_11, _x2_15, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
            tc_vf _x8_0 = TC_SHUFFLE(_x4_0, _x4_8, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_8 = TC_SHUFFLE(_x4_0, _x4_8, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_1 = TC_SHUFFLE(_x4_1, _x4_9, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_9 = TC_SHUFFLE(_x4_1, _x4_9, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_2 = TC_SHUFFLE(_x4_2, _x4_10, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_10 = TC_SHUFFLE(_x4_2, _x4_10, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_3 = TC_SHUFFLE(_x4_3, _x4_11, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_11 = TC_SHUFFLE(_x4_3, _x4_11, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_4 = TC_SHUFFLE(_x4_4, _x4_12, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_12 = TC_SHUFFLE(_x4_4, _x4_12, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_5 = TC_SHUFFLE(_x4_5, _x4_13, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_13 = TC_SHUFFLE(_x4_5, _x4_13, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_6 = TC_SHUFFLE(_x4_6, _x4_14, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_14 = TC_SHUFFLE(_x4_6, _x4_14, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            tc_vf _x8_7 = TC_SHUFFLE(_x4_7, _x4_15, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
            tc_vf _x8_15 = TC_SHUFFLE(_x4_7, _x4_15, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
            *(tc_vf *)&_bp[(_k + 0) * 32 + 16] = _x8_0;
            *(tc_vf *)&_bp[(_k + 1) * 32 + 16] = _x8_1;
            *(tc_vf *)&_bp[(_k + 2) * 32 + 16] = _x8_2;
            *(tc_vf *)&_bp[(_k + 3) * 32 + 16] = _x8_3;
            *(tc_vf *)&_bp[(_k + 4) * 32 + 16] = _x8_4;
            *(tc_vf *)&_bp[(_k + 5) * 32 + 16] = _x8_5;
            *(tc_vf *)&_bp[(_k + 6) * 32 + 16] = _x8_6;
            *(tc_vf *)&_bp[(_k + 7) * 32 + 16] = _x8_7;
            *(tc_vf *)&_bp[(_k + 8) * 32 + 16] = _x8_8;
            *(tc_vf *)&_bp[(_k + 9) * 32 + 16] = _x8_9;
            *(tc_vf *)&_bp[(_k + 10) * 32 + 16] = _x8_10;
            *(tc_vf *)&_bp[(_k + 11) * 32 + 16] = _x8_11;
            *(tc_vf *)&_bp[(_k + 12) * 32 + 16] = _x8_12;
            *(tc_vf *)&_bp[(_k + 13) * 32 + 16] = _x8_13;
            *(tc_vf *)&_bp[(_k + 14) * 32 + 16] = _x8_14;
            *(tc_vf *)&_bp[(_k + 15) * 32 + 16] = _x8_15;
          }
          _k = kn;
        }
        for (; _k < kn; _k++) {
          for (int _l = 0; _l < 32; _l++) _bp[_k * 32 + _l] = t_W[((int64_t)(((int32_t)((b0 + _l)))) * 125 + (int64_t)(((int32_t)((k0 + _k)))))];
        }
        int a0 = a_lo;
        for (; a0 + 12 <= a_hi; a0 += 12) {
          tc_vf c0_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 0)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c0_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 0)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c1_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 1)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c1_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 1)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c2_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 2)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c2_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 2)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c3_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 3)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c3_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 3)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c4_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 4)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c4_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 4)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c5_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 5)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c5_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 5)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c6_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 6)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c6_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 6)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c7_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 7)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c7_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 7)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c8_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 8)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c8_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 8)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c9_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 9)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c9_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 9)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c10_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 10)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c10_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 10)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c11_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 11)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c11_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 11)) * 128 + (int64_t)((b0 + 16)))];
          const float *_src = _bp;
          for (int _r = k0; _r < k0 + kn; _r++) {
            tc_vf _v0 = *(const tc_vf *)&_src[0]; __asm__("" : "+v"(_v0));
            tc_vf _v1 = *(const tc_vf *)&_src[16]; __asm__("" : "+v"(_v1));
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 0)))) * 125 + (int64_t)(((int32_t)(_r))))]); c0_0 += _s * _v0; c0_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 1)))) * 125 + (int64_t)(((int32_t)(_r))))]); c1_0 += _s * _v0; c1_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 2)))) * 125 + (int64_t)(((int32_t)(_r))))]); c2_0 += _s * _v0; c2_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 3)))) * 125 + (int64_t)(((int32_t)(_r))))]); c3_0 += _s * _v0; c3_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 4)))) * 125 + (int64_t)(((int32_t)(_r))))]); c4_0 += _s * _v0; c4_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 5)))) * 125 + (int64_t)(((int32_t)(_r))))]); c5_0 += _s * _v0; c5_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 6)))) * 125 + (int64_t)(((int32_t)(_r))))]); c6_0 += _s * _v0; c6_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 7)))) * 125 + (int64_t)(((int32_t)(_r))))]); c7_0 += _s * _v0; c7_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 8)))) * 125 + (int64_t)(((int32_t)(_r))))]); c8_0 += _s * _v0; c8_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 9)))) * 125 + (int64_t)(((int32_t)(_r))))]); c9_0 += _s * _v0; c9_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 10)))) * 125 + (int64_t)(((int32_t)(_r))))]); c10_0 += _s * _v0; c10_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 11)))) * 125 + (int64_t)(((int32_t)(_r))))]); c11_0 += _s * _v0; c11_1 += _s * _v1; }
            _src += 32;
          }
          *(tc_vfu *)&t_O[((int64_t)((a0 + 0)) * 128 + (int64_t)((b0 + 0)))] = c0_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 0)) * 128 + (int64_t)((b0 + 16)))] = c0_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 1)) * 128 + (int64_t)((b0 + 0)))] = c1_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 1)) * 128 + (int64_t)((b0 + 16)))] = c1_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 2)) * 128 + (int64_t)((b0 + 0)))] = c2_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 2)) * 128 + (int64_t)((b0 + 16)))] = c2_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 3)) * 128 + (int64_t)((b0 + 0)))] = c3_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 3)) * 128 + (int64_t)((b0 + 16)))] = c3_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 4)) * 128 + (int64_t)((b0 + 0)))] = c4_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 4)) * 128 + (int64_t)((b0 + 16)))] = c4_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 5)) * 128 + (int64_t)((b0 + 0)))] = c5_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 5)) * 128 + (int64_t)((b0 + 16)))] = c5_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 6)) * 128 + (int64_t)((b0 + 0)))] = c6_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 6)) * 128 + (int64_t)((b0 + 16)))] = c6_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 7)) * 128 + (int64_t)((b0 + 0)))] = c7_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 7)) * 128 + (int64_t)((b0 + 16)))] = c7_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 8)) * 128 + (int64_t)((b0 + 0)))] = c8_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 8)) * 128 + (int64_t)((b0 + 16)))] = c8_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 9)) * 128 + (int64_t)((b0 + 0)))] = c9_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 9)) * 128 + (int64_t)((b0 + 16)))] = c9_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 10)) * 128 + (int64_t)((b0 + 0)))] = c10_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 10)) * 128 + (int64_t)((b0 + 16)))] = c10_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 11)) * 128 + (int64_t)((b0 + 0)))] = c11_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 11)) * 128 + (int64_t)((b0 + 16)))] = c11_1;
        }
        if (a0 < a_hi) {
          tc_vf c0_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 0)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c0_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 0)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c1_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 1)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c1_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 1)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c2_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 2)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c2_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 2)) * 128 + (int64_t)((b0 + 16)))];
          tc_vf c3_0 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 3)) * 128 + (int64_t)((b0 + 0)))];
          tc_vf c3_1 = k0 == 0 ? (tc_vf){0} : *(const tc_vfu *)&t_O[((int64_t)((a0 + 3)) * 128 + (int64_t)((b0 + 16)))];
          const float *_src = _bp;
          for (int _r = k0; _r < k0 + kn; _r++) {
            tc_vf _v0 = *(const tc_vf *)&_src[0]; __asm__("" : "+v"(_v0));
            tc_vf _v1 = *(const tc_vf *)&_src[16]; __asm__("" : "+v"(_v1));
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 0)))) * 125 + (int64_t)(((int32_t)(_r))))]); c0_0 += _s * _v0; c0_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 1)))) * 125 + (int64_t)(((int32_t)(_r))))]); c1_0 += _s * _v0; c1_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 2)))) * 125 + (int64_t)(((int32_t)(_r))))]); c2_0 += _s * _v0; c2_1 += _s * _v1; }
            { const float _s = (float)(t_I[((int64_t)(((int32_t)((a0 + 3)))) * 125 + (int64_t)(((int32_t)(_r))))]); c3_0 += _s * _v0; c3_1 += _s * _v1; }
            _src += 32;
          }
          *(tc_vfu *)&t_O[((int64_t)((a0 + 0)) * 128 + (int64_t)((b0 + 0)))] = c0_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 0)) * 128 + (int64_t)((b0 + 16)))] = c0_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 1)) * 128 + (int64_t)((b0 + 0)))] = c1_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 1)) * 128 + (int64_t)((b0 + 16)))] = c1_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 2)) * 128 + (int64_t)((b0 + 0)))] = c2_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 2)) * 128 + (int64_t)((b0 + 16)))] = c2_1;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 3)) * 128 + (int64_t)((b0 + 0)))] = c3_0;
          *(tc_vfu *)&t_O[((int64_t)((a0 + 3)) * 128 + (int64_t)((b0 + 16)))] = c3_1;
        }
      }
    }
  }
done:
  return code;
}
