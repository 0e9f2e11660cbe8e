# Robustness: the fault, load and secure-default tests (docs/robustness.md
# lists what each one proves; the fuzz corpus replays are in
# tests/CMakeLists.txt).
# Included by tests/CMakeLists.txt.

# --- faults, bad input, load, secure defaults: real plugins against the
# kubelet emulator and raw clients (tests/robustness/test_robustness.py) ---
option(KDP_ROBUSTNESS_SANITIZED "The build is sanitized (e.g. TSan): memory figures not asserted" OFF)
if(KDP_INTEROP)
  set(KDP_ROBUSTNESS_ENV "KDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
  if(KDP_SANITIZE OR KDP_ROBUSTNESS_SANITIZED)
    # Allocators that quarantine freed memory: RSS is printed, not asserted;
    # 100,000 Allocates instead of 1,000,000.
    list(APPEND KDP_ROBUSTNESS_ENV "KDP_SANITIZED=1")
  endif()
  foreach(cls_timeout IN ITEMS Restarts:600 KubeletFaults:300 BadClients:300 Load:900 Secure:300)
    string(REPLACE ":" ";" ct ${cls_timeout})
    list(GET ct 0 cls)
    list(GET ct 1 tmo)
    add_test(NAME robustness_${cls}
      COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/robustness/test_robustness.py ${cls})
    set_tests_properties(robustness_${cls} PROPERTIES TIMEOUT ${tmo} LABELS robustness
      ENVIRONMENT "${KDP_ROBUSTNESS_ENV}")
  endforeach()

  # valgrind memcheck of kdp-example-gopher through a whole lifecycle: not in
  # sanitized builds (their binaries do not run under valgrind). Fails, saying
  # so, where valgrind is not installed.
  if(NOT KDP_SANITIZE AND NOT KDP_ROBUSTNESS_SANITIZED)
    add_test(NAME valgrind_gopher
      COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/robustness/test_robustness.py Valgrind)
    set_tests_properties(valgrind_gopher PROPERTIES TIMEOUT 600 LABELS robustness
      ENVIRONMENT "${KDP_ROBUSTNESS_ENV}")
  endif()
endif()
