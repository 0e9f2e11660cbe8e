# The API-server client's HTTP(S) on kdp's loop (src/k8s/httpc): a test
# program and a real HTTPS server (Python's http.server + ssl, certificates
# from the openssl CLI). Included by tests/CMakeLists.txt.
add_executable(kdp-test-http ${CMAKE_CURRENT_SOURCE_DIR}/k8s/http_client.c)
target_compile_options(kdp-test-http PRIVATE ${KDP_WARNINGS})
target_link_libraries(kdp-test-http PRIVATE kdp_internal_k8s)
add_test(NAME k8s_http COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/k8s/test_http.py)
set_tests_properties(k8s_http PROPERTIES TIMEOUT 180 LABELS integration
  ENVIRONMENT "KDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin")

# The API-server side of the DRA driver (src/k8s: kconfig, api, claims,
# slices) through kdp-test-k8s, against the API-server emulator
# (tests/apiserver, kdptest.apiserver), kubectl and python3-kubernetes.
add_executable(kdp-test-k8s ${CMAKE_CURRENT_SOURCE_DIR}/k8s/k8s_driver.c)
target_compile_options(kdp-test-k8s PRIVATE ${KDP_WARNINGS})
target_link_libraries(kdp-test-k8s PRIVATE kdp_internal_k8s)
add_test(NAME k8s_api COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/k8s/test_k8s.py)
set_tests_properties(k8s_api PROPERTIES TIMEOUT 600 LABELS integration
  ENVIRONMENT "KDP_BIN_DIR=${CMAKE_BINARY_DIR}/bin")
