// Which sanitizer a test binary is built with, for GCC (__SANITIZE_*__) and clang (__has_feature)
// alike: STRATA_TEST_ASAN and STRATA_TEST_TSAN are 1 or 0.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define STRATA_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STRATA_TEST_ASAN 1
#endif
#endif
#ifndef STRATA_TEST_ASAN
#define STRATA_TEST_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define STRATA_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define STRATA_TEST_TSAN 1
#endif
#endif
#ifndef STRATA_TEST_TSAN
#define STRATA_TEST_TSAN 0
#endif
