# The fuzz targets, one per fuzz/fuzz_<name>.c (found by glob: a new file is
# a new target), each with the layer whose internals it drives (its view of
# src/; see the top-level CMakeLists.txt). Included by fuzz/CMakeLists.txt
# (libFuzzer builds) and tests/CMakeLists.txt (corpus replays in every build).
file(GLOB KDP_FUZZ_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/fuzz/fuzz_*.c)
set(KDP_FUZZ_TARGETS)
foreach(src IN LISTS KDP_FUZZ_SOURCES)
  get_filename_component(name ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" name ${name})
  list(APPEND KDP_FUZZ_TARGETS ${name})
endforeach()
set(KDP_FUZZ_LAYER_deframer grpc)
set(KDP_FUZZ_LAYER_server_conn grpc)
set(KDP_FUZZ_LAYER_client_conn grpc)
set(KDP_FUZZ_LAYER_plugin_rpc plugin)
set(KDP_FUZZ_LAYER_validate plugin)
set(KDP_FUZZ_LAYER_devices plugin)
set(KDP_FUZZ_LAYER_prefer plugin)
set(KDP_FUZZ_LAYER_podres plugin)
set(KDP_FUZZ_LAYER_http plugin)
set(KDP_FUZZ_LAYER_claim k8s)
set(KDP_FUZZ_LAYER_kconfig k8s)
set(KDP_FUZZ_LAYER_dra_rpc dra)
# kdpctl dra apiserver's request handling: tools/kdpctl's sources (through
# fuzz/dra_api/, one compile command per source), with the target standing
# in for its HTTP side (dra_http.c).
set(KDP_FUZZ_LAYER_dra_api dra)
set(KDP_FUZZ_INCLUDES_dra_api ${CMAKE_SOURCE_DIR}/tools/kdpctl ${CMAKE_SOURCE_DIR}/tools)
set(KDP_FUZZ_EXTRA_dra_api
  ${CMAKE_SOURCE_DIR}/fuzz/dra_api/dra_route.c ${CMAKE_SOURCE_DIR}/fuzz/dra_api/dra_rest.c
  ${CMAKE_SOURCE_DIR}/fuzz/dra_api/dra_store.c ${CMAKE_SOURCE_DIR}/fuzz/dra_api/dra_out.c
  ${CMAKE_SOURCE_DIR}/fuzz/dra_api/dra_table.c ${CMAKE_SOURCE_DIR}/fuzz/dra_api/print.c
  ${CMAKE_SOURCE_DIR}/fuzz/dra_api/dra_check.c ${CMAKE_SOURCE_DIR}/fuzz/dra_api/dra_check_share.c
  ${CMAKE_SOURCE_DIR}/fuzz/dra_api/dra_check_status.c
  ${CMAKE_SOURCE_DIR}/fuzz/dra_api/dra_check_class.c ${CMAKE_SOURCE_DIR}/fuzz/dra_api/dra_slice_out.c
  ${CMAKE_SOURCE_DIR}/fuzz/dra_api/dra_binding.c)
foreach(name IN LISTS KDP_FUZZ_TARGETS)
  if(NOT KDP_FUZZ_LAYER_${name})
    message(FATAL_ERROR "fuzz/fuzz_${name}.c: name its layer in fuzz/targets.cmake")
  endif()
endforeach()
