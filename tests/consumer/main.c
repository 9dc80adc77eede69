/* A C program on the installed library: the C ABI and the version macros. */
#include <fp8jit/fp8jit.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  int64_t count = 0;
  if (fp8jit_scale_count(FP8JIT_GRANULARITY_GROUP128, FP8JIT_SCALE_LAYOUT_ROW_MAJOR, 4, 256,
                         &count) != FP8JIT_SUCCESS) {
    fprintf(stderr, "fp8jit_scale_count: %s\n", fp8jit_last_error());
    return 1;
  }
  printf("fp8jit %s (headers %s, %d.%d.%d): %lld scales\n", fp8jit_version(), FP8JIT_VERSION_STRING,
         FP8JIT_VERSION_MAJOR, FP8JIT_VERSION_MINOR, FP8JIT_VERSION_PATCH, (long long)count);
  return (count == 8 && strcmp(fp8jit_version(), FP8JIT_VERSION_STRING) == 0) ? 0 : 1;
}
