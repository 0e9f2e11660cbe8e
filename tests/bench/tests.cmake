# The benchmark harness (bench/): not run by `make test` in full (`make bench`
# does that), but a smoke run with tiny counts checks that it still produces
# every figure. Needs Go (the reference plugin and the driver), so it lives
# with the other grpc-go tests.
if(KDP_INTEROP)
  add_test(NAME bench_smoke
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/bench/smoke.py ${CMAKE_BINARY_DIR})
  set_tests_properties(bench_smoke PROPERTIES TIMEOUT 240 LABELS bench)
endif()
