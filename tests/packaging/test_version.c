/* SPDX-License-Identifier: MIT */
/*
 * The three places that state kdp's version agree: project(VERSION) in
 * CMakeLists.txt (passed in as KDP_EXPECT_*), the KDP_VERSION_* macros of
 * kdp.h, and kdp_version() of the library this is linked with (libkdp.so).
 */
#include <kdp.h>
#include <stdio.h>
#include <string.h>

#if !defined(KDP_EXPECT_MAJOR) || !defined(KDP_EXPECT_MINOR) || !defined(KDP_EXPECT_PATCH) ||      \
    !defined(KDP_EXPECT_VERSION)
#error "build with -DKDP_EXPECT_{MAJOR,MINOR,PATCH,VERSION} (tests/packaging/tests.cmake)"
#endif

_Static_assert(KDP_VERSION_MAJOR == KDP_EXPECT_MAJOR, "KDP_VERSION_MAJOR != CMake's major version");
_Static_assert(KDP_VERSION_MINOR == KDP_EXPECT_MINOR, "KDP_VERSION_MINOR != CMake's minor version");
_Static_assert(KDP_VERSION_PATCH == KDP_EXPECT_PATCH, "KDP_VERSION_PATCH != CMake's patch version");
_Static_assert(KDP_VERSION_MINOR < 100 && KDP_VERSION_PATCH < 100,
               "KDP_VERSION packs MINOR and PATCH in two digits each");
_Static_assert(KDP_VERSION / 10000 == KDP_EXPECT_MAJOR &&
                   KDP_VERSION / 100 % 100 == KDP_EXPECT_MINOR &&
                   KDP_VERSION % 100 == KDP_EXPECT_PATCH,
               "KDP_VERSION does not decode to CMake's version");

int main(void)
{
    int bad = 0;
    if (strcmp(KDP_VERSION_STRING, KDP_EXPECT_VERSION) != 0) {
        fprintf(stderr, "KDP_VERSION_STRING is %s, CMake's project version %s\n",
                KDP_VERSION_STRING, KDP_EXPECT_VERSION);
        bad = 1;
    }
    const char *v = kdp_version();
    if (!v || strcmp(v, KDP_EXPECT_VERSION) != 0) {
        fprintf(stderr, "kdp_version() returns %s, CMake's project version is %s\n", v ? v : "NULL",
                KDP_EXPECT_VERSION);
        bad = 1;
    }
    printf("header %s (KDP_VERSION %d), library %s, CMake %s: %s\n", KDP_VERSION_STRING,
           KDP_VERSION, v ? v : "NULL", KDP_EXPECT_VERSION, bad ? "MISMATCH" : "agree");
    return bad;
}
