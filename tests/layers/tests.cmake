# The layers of src/ (tests/layers/check_layers.py): every private include
# names its layer and none goes up. Included by tests/CMakeLists.txt.
add_test(NAME layers_includes
  COMMAND /usr/bin/python3 ${CMAKE_CURRENT_SOURCE_DIR}/layers/check_layers.py)
set_tests_properties(layers_includes PROPERTIES TIMEOUT 60 LABELS unit)
