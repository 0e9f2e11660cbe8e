# kdp's DRA driver (src/dra) end to end: the gopher example's DRA mode
# between the kubelet emulator (tests/kubelet) and the API-server emulator
# (tests/apiserver). Included by tests/CMakeLists.txt.
add_executable(kdp-test-dra-driver ${CMAKE_CURRENT_SOURCE_DIR}/dra/test_driver.c)
target_compile_options(kdp-test-dra-driver PRIVATE ${KDP_WARNINGS})
target_link_libraries(kdp-test-dra-driver PRIVATE kdp_dra_static)
if(KDP_INTEROP AND NOT KDP_STATIC_TOOLS)
  # In two halves (their test classes), so that ctest -j runs them side by
  # side: together they are the longest test of the tree.
  add_test(NAME dra_driver COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/dra/test_dra.py
    Registration Slices Prepare)
  add_test(NAME dra_driver_knobs
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/dra/test_dra.py Knobs Config)
  # Sharing: kdp-example-accel's partitions and shares.
  add_test(NAME dra_sharing COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/dra/test_sharing.py)
  # Device metadata (KEP-5304): the files, their CDI mounts, generations.
  add_test(NAME dra_metadata COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/dra/test_metadata.py)
  # Binding conditions (KEP-5007): the claim watch and the bind op.
  add_test(NAME dra_binding COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/dra/test_binding.py)
  set(KDP_DRA_TEST_ENV "KDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
  if(KDP_SANITIZE OR KDP_ROBUSTNESS_SANITIZED)
    list(APPEND KDP_DRA_TEST_ENV "KDP_SANITIZED=1") # memory figures printed, not asserted
  endif()
  set_tests_properties(dra_driver dra_driver_knobs dra_sharing dra_metadata dra_binding PROPERTIES TIMEOUT 600
    LABELS integration ENVIRONMENT "${KDP_DRA_TEST_ENV}")
endif()
