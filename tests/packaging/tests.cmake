# Packaging and deployment (issue 7), included by tests/CMakeLists.txt. Every
# test has the label "packaging":
#   packaging_version  header macros == project(VERSION) == kdp_version() of libkdp.so
#   packaging_install  cmake --install into a throwaway prefix, moved; a consumer
#                      built with pkg-config (shared, --static) and find_package
#   packaging_static   the image's binary built as deploy/Dockerfile builds it:
#                      static, < 2 MB, registers with the kubelet emulator
#   packaging_metrics_image  the metrics image's binary built as
#                      deploy/Dockerfile.metrics builds it: its libraries come
#                      from the runtime stage's packages; /healthz and /metrics
#                      while registered with the kubelet emulator
#   packaging_deploy   deploy/ manifests (YAML, kinds, paths, flags), the systemd unit
#   packaging_apidoc   docs/api.md up to date with include/kdp.h and kdp_dra.h;
#                      libkdp.so and libkdp-dra.so export exactly their
#                      KDP_EXPORT functions
set(KDP_PKG_DIR ${CMAKE_CURRENT_LIST_DIR})

add_executable(test_packaging_version ${KDP_PKG_DIR}/test_version.c)
target_compile_options(test_packaging_version PRIVATE ${KDP_WARNINGS})
target_compile_definitions(test_packaging_version PRIVATE
  KDP_EXPECT_MAJOR=${PROJECT_VERSION_MAJOR} KDP_EXPECT_MINOR=${PROJECT_VERSION_MINOR}
  KDP_EXPECT_PATCH=${PROJECT_VERSION_PATCH} KDP_EXPECT_VERSION="${PROJECT_VERSION}")
target_link_libraries(test_packaging_version PRIVATE kdp)
add_test(NAME packaging_version COMMAND test_packaging_version)

# Consumers of a sanitizer build's libkdp need the sanitizer runtimes too.
set(KDP_PKG_SAN_FLAGS "")
if(KDP_SANITIZE OR KDP_FUZZ)
  set(KDP_PKG_SAN_FLAGS "-fsanitize=address,undefined")
endif()
add_test(NAME packaging_install COMMAND /usr/bin/python3 ${KDP_PKG_DIR}/test_install.py)
set_tests_properties(packaging_install PROPERTIES ENVIRONMENT
  "KDP_BUILD_DIR=${CMAKE_BINARY_DIR};KDP_CMAKE=${CMAKE_COMMAND};KDP_CC=${CMAKE_C_COMPILER};KDP_SAN_FLAGS=${KDP_PKG_SAN_FLAGS};KDP_VERSION=${PROJECT_VERSION};KDP_SOVERSION=${KDP_SOVERSION}")

# The static build is its own (non-sanitizer) build: once, from the normal build.
if(NOT KDP_SANITIZE AND NOT KDP_FUZZ)
  add_test(NAME packaging_static COMMAND /usr/bin/python3 ${KDP_PKG_DIR}/test_static.py)
  set_tests_properties(packaging_static PROPERTIES ENVIRONMENT
    "KDP_BUILD_DIR=${CMAKE_BINARY_DIR};KDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
  add_test(NAME packaging_metrics_image
    COMMAND /usr/bin/python3 ${KDP_PKG_DIR}/test_metrics_image.py)
  set_tests_properties(packaging_metrics_image PROPERTIES ENVIRONMENT
    "KDP_BUILD_DIR=${CMAKE_BINARY_DIR};KDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
  add_test(NAME packaging_dra_image COMMAND /usr/bin/python3 ${KDP_PKG_DIR}/test_dra_image.py)
  set_tests_properties(packaging_dra_image PROPERTIES ENVIRONMENT
    "KDP_BUILD_DIR=${CMAKE_BINARY_DIR};KDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
endif()

add_test(NAME packaging_deploy COMMAND /usr/bin/python3 ${KDP_PKG_DIR}/test_deploy.py)
set_tests_properties(packaging_deploy PROPERTIES ENVIRONMENT "KDP_BUILD_DIR=${CMAKE_BINARY_DIR}")

add_test(NAME packaging_apidoc COMMAND /usr/bin/python3 ${KDP_PKG_DIR}/apidoc.py --check
  --lib $<TARGET_FILE:kdp> --dra-lib $<TARGET_FILE:kdp_dra_shared>)

foreach(t IN ITEMS packaging_version packaging_install packaging_static packaging_metrics_image
        packaging_dra_image packaging_deploy packaging_apidoc)
  if(TEST ${t})
    set_tests_properties(${t} PROPERTIES LABELS packaging TIMEOUT 300)
  endif()
endforeach()
