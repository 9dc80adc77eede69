/* FP8JIT_API marks the public API: the only symbols libfp8jit.so exports. The library is compiled
 * with hidden visibility (-fvisibility=hidden -fvisibility-inlines-hidden), so internals, and the
 * fmt, nlohmann::json and SQLite code inside them, stay out of the shared library's dynamic symbol
 * table and cannot clash with a consumer's copies. On ELF the same attribute serves the build of
 * the library and its users (static or shared), so nothing needs defining to choose between them.
 * Plain C: fp8jit.h includes it. */
#ifndef FP8JIT_EXPORT_HPP_
#define FP8JIT_EXPORT_HPP_

#if defined(__GNUC__) || defined(__clang__)
#define FP8JIT_API __attribute__((visibility("default")))
#else
#define FP8JIT_API
#endif

#endif /* FP8JIT_EXPORT_HPP_ */
