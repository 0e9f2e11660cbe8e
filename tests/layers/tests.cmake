# The layers of src/ (tests/layers/check_layers.py): every private include
# names its layer and none goes up. Included by tests/CMakeLists.txt.
add_test(NAME layers_includes
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/layers/check_layers.py)
set_tests_properties(layers_includes PROPERTIES TIMEOUT 60 LABELS unit)

# The same from the built objects' symbols (tests/layers/check_symbols.py):
# no module uses a higher layer, no cycle between modules but those of
# tests/layers/known_cycles.txt. It reads the objects of kdp_<layer> under
# the build directory, so it runs after the build; any compiler, any nm.
if(CMAKE_NM)
  set(KDP_LAYERS_NM --nm ${CMAKE_NM})
endif()
add_test(NAME layers_symbols
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/layers/check_symbols.py
          ${CMAKE_BINARY_DIR} ${KDP_LAYERS_NM})
# check_symbols.py finds what it must: a planted cycle and an upward use, in
# tiny modules compiled with the build's compiler.
add_test(NAME layers_symbols_selftest
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/layers/check_symbols.py --self-test
          --cc ${CMAKE_C_COMPILER} ${KDP_LAYERS_NM})
set_tests_properties(layers_symbols layers_symbols_selftest PROPERTIES TIMEOUT 60 LABELS unit)
