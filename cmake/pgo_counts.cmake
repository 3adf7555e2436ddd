# pgo_counts.cmake — cmake -DDIR=... -DNAMES=a,b -DMODE=clear|check -P pgo_counts.cmake
#
# The training run's count files (NAME.gcda in DIR, cmake/pgo.cmake): cleared before it, as
# counts add up across runs; checked after it, one for each source.
if(NOT DIR OR NOT NAMES OR NOT MODE)
  message(FATAL_ERROR "pgo_counts.cmake: DIR, NAMES and MODE are required")
endif()
if(NOT MODE STREQUAL "clear" AND NOT MODE STREQUAL "check")
  message(FATAL_ERROR "pgo_counts.cmake: MODE is clear or check, not '${MODE}'")
endif()
# commas, not a CMake list: a ";" in a custom command's argument splits it into arguments
string(REPLACE "," ";" NAMES "${NAMES}")
foreach(name ${NAMES})
  if(MODE STREQUAL "clear")
    file(REMOVE "${DIR}/${name}.gcda")
  elseif(NOT EXISTS "${DIR}/${name}.gcda")
    message(FATAL_ERROR "pgo: the training run left no counts for ${name} in ${DIR}")
  endif()
endforeach()
