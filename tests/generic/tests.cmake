# kdp-generic (the discovery helpers' unit tests are found with the others,
# tests/unit/test_*.c). Included by tests/CMakeLists.txt, in its scope.

# kdp-generic end to end against the kubelet emulator (grpc-go).
if(KDP_INTEROP AND TARGET kdp-generic)
  add_test(NAME generic_e2e
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/generic/test_generic.py)
  set_tests_properties(generic_e2e PROPERTIES TIMEOUT 600 LABELS integration
    ENVIRONMENT "KDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
  # pci: entries (NVIDIA, DRM, accel, VFIO on a fake sysfs), sharedNodes,
  # drivers unbound and bound at run time
  add_test(NAME generic_pci
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/generic/test_pci.py)
  set_tests_properties(generic_pci PROPERTIES TIMEOUT 300 LABELS integration
    ENVIRONMENT "KDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
  # dra: a resource served as a DRA driver (the build with libkdp-dra),
  # against the API-server and kubelet emulators
  if(TARGET kdp-generic-dra)
    add_test(NAME generic_dra
      COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/generic/test_dra.py)
    set_tests_properties(generic_dra PROPERTIES TIMEOUT 300 LABELS integration
      ENVIRONMENT "KDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
  endif()
  # health: (node exists, file, command) with the probe op's hysteresis
  add_test(NAME generic_health
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/generic/test_health.py)
  set_tests_properties(generic_health PROPERTIES TIMEOUT 300 LABELS integration
    ENVIRONMENT "KDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
endif()
