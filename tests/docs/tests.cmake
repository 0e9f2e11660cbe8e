# The user docs, run (tests/docs/test_docs.py): every fenced block of each
# doc below is run, compiled or checked, one ctest per doc (docs_<name>).
# Included by tests/CMakeLists.txt. The docs build programs against an
# installed kdp with a plain cc, which cannot link a sanitizer build's libkdp.
if(KDP_SANITIZE OR KDP_FUZZ OR KDP_ROBUSTNESS_SANITIZED)
  return()
endif()
set(KDP_DOCS README.md docs/tutorial.md)
if(KDP_INTEROP) # kdpctl.md's examples include kdp-go-testplugin, a grpc-go plugin
  list(APPEND KDP_DOCS docs/kdpctl.md)
endif()
if(KDP_HAVE_MHD AND NOT KDP_STATIC_TOOLS) # dra.md runs kdpctl dra (libmicrohttpd)
  list(APPEND KDP_DOCS docs/dra.md)
endif()
if(TARGET kdp-generic) # built only with libyaml
  list(APPEND KDP_DOCS docs/generic.md)
endif()
foreach(doc IN LISTS KDP_DOCS)
  get_filename_component(name ${doc} NAME_WE)
  add_test(NAME docs_${name}
    COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/test_docs.py ${doc})
  set_tests_properties(docs_${name} PROPERTIES TIMEOUT 300 LABELS docs
    ENVIRONMENT "KDP_BUILD_DIR=${CMAKE_BINARY_DIR};KDP_CMAKE=${CMAKE_COMMAND};KDP_CC=${CMAKE_C_COMPILER}")
endforeach()
