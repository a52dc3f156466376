# The library's layers point only down (docs/architecture.md), checked two
# ways; fails naming the file, the symbol or the header that points up.
#   cmake -DCC=cc -DSOURCE_DIR=... -DWORK_DIR=... -DLAYERS=base,child,...
#         -DARCHIVES=libsaferun_base.a,... -DSYSTEM_LIBS="-lcap ..." [-DLINK_FLAGS="..."]
#         -P layers.cmake
#
# Headers: a file of runtime/lib/L includes its own folder's headers by
# name and a lower layer's only through that layer's header, "M/M.h".
#
# Symbols: each layer's archive, whole, is linked into a shared object
# with -Wl,--no-undefined against only the lower layers' archives and the
# system libraries, so a call into a higher layer is an undefined symbol.
cmake_minimum_required(VERSION 3.18)
foreach(var CC SOURCE_DIR WORK_DIR LAYERS ARCHIVES)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "layers.cmake: -D${var}=... is missing")
  endif()
endforeach()
string(REPLACE "," ";" LAYERS "${LAYERS}")
string(REPLACE "," ";" ARCHIVES "${ARCHIVES}")
separate_arguments(system_libs UNIX_COMMAND "${SYSTEM_LIBS}")
separate_arguments(link_flags UNIX_COMMAND "${LINK_FLAGS}")
file(MAKE_DIRECTORY ${WORK_DIR})
set(failures 0)

list(LENGTH LAYERS n)
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  list(GET LAYERS ${i} layer)
  set(lower "")
  if(i GREATER 0)
    math(EXPR top "${i} - 1")
    foreach(j RANGE ${top})
      list(GET LAYERS ${j} l)
      list(APPEND lower ${l})
    endforeach()
  endif()

  file(GLOB files ${SOURCE_DIR}/runtime/lib/${layer}/*.[ch])
  foreach(f IN LISTS files)
    file(STRINGS ${f} incs REGEX "^#include \"")
    foreach(inc IN LISTS incs)
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" h "${inc}")
      if(h STREQUAL "saferun.h" OR EXISTS ${SOURCE_DIR}/runtime/lib/${layer}/${h})
        continue()
      endif()
      set(m "")
      string(REGEX MATCH "^([a-z]+)/([a-z]+)\\.h$" m "${h}")
      if(NOT m OR NOT CMAKE_MATCH_1 STREQUAL CMAKE_MATCH_2 OR NOT CMAKE_MATCH_1 IN_LIST lower)
        message(SEND_ERROR "${f}: includes \"${h}\": the ${layer} layer may include "
                           "only its own headers and those of: ${lower}")
        math(EXPR failures "${failures} + 1")
      endif()
    endforeach()
  endforeach()

  # The archives below, highest first, as a linker reads them.
  set(below "")
  foreach(l IN LISTS lower)
    list(FIND LAYERS ${l} k)
    list(GET ARCHIVES ${k} a)
    list(PREPEND below ${a})
  endforeach()
  list(GET ARCHIVES ${i} archive)
  execute_process(
    COMMAND ${CC} -shared -o ${WORK_DIR}/layer_${layer}.so ${link_flags}
            -Wl,--whole-archive ${archive} -Wl,--no-whole-archive ${below} ${system_libs}
            -Wl,--no-undefined
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(SEND_ERROR "the ${layer} layer needs more than the layers below it (${lower}) "
                       "and the system libraries:\n${out}")
    math(EXPR failures "${failures} + 1")
  else()
    message(STATUS "${layer}: links against the system libraries and: ${lower}")
  endif()
endforeach()

if(failures GREATER 0)
  message(FATAL_ERROR "${failures} layering error(s)")
endif()
