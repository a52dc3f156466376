# libsaferun.so's dynamic symbols are exactly saferun.h's SR_PUBLIC
# declarations: fails naming an export the header does not declare (an
# internal function that leaked) or a declaration the library does not
# export (a missing SR_PUBLIC, or a function that is gone).
#   cmake -DNM=nm -DLIB=libsaferun.so -DHEADER=saferun.h -P exports.cmake
cmake_minimum_required(VERSION 3.18)
foreach(var NM LIB HEADER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "exports.cmake: -D${var}=... is missing")
  endif()
endforeach()

file(READ ${HEADER} header)
string(REGEX MATCHALL "SR_PUBLIC[^;(]*[ *](sr_[a-z0-9_]+)\\(" decls "${header}")
set(declared "")
foreach(d IN LISTS decls)
  string(REGEX REPLACE ".*[ *](sr_[a-z0-9_]+)\\($" "\\1" name "${d}")
  list(APPEND declared ${name})
endforeach()
list(LENGTH declared n_declared)
if(n_declared EQUAL 0)
  message(FATAL_ERROR "${HEADER}: no SR_PUBLIC declarations found")
endif()

execute_process(COMMAND ${NM} -D --defined-only ${LIB} RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIB}: ${err}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(exported "")
foreach(l IN LISTS lines)
  # "ADDRESS TYPE NAME": global symbols have an upper-case type
  if(l MATCHES "^[0-9a-f]+ [A-Z] ([^ ]+)$")
    list(APPEND exported ${CMAKE_MATCH_1})
  endif()
endforeach()

set(extra ${exported})
list(REMOVE_ITEM extra ${declared})
set(missing ${declared})
list(REMOVE_ITEM missing ${exported})
list(LENGTH exported n_exported)
if(extra OR missing)
  list(JOIN extra " " extra)
  list(JOIN missing " " missing)
  message(FATAL_ERROR "${LIB} exports ${n_exported} symbols, ${HEADER} declares "
                      "${n_declared}\n exported but not declared: ${extra}\n"
                      " declared but not exported: ${missing}")
endif()
message(STATUS "${LIB}: ${n_exported} exports, each declared in saferun.h")
