# kdpctl: the kubelet emulator and inspector, end to end against kdp's
# examples and a grpc-go plugin (kdp-go-testplugin), and scripts/demo.sh.
# Included from tests/CMakeLists.txt (so paths are relative to tests/).
if(KDP_INTEROP)
  foreach(t IN ITEMS commands kubelet demo dra)
    add_test(NAME kdpctl_${t}
      COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/kdpctl/test_${t}.py)
    set_tests_properties(kdpctl_${t} PROPERTIES TIMEOUT 300 LABELS integration
      ENVIRONMENT "KDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
  endforeach()
endif()
