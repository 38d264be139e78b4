# `mpirun -np 2 nnlens profile` writes the profile one process writes (tests/tool/CMakeLists.txt).
# -DTOOL= the nnlens tool, -DMPIRUN= the launcher up to the rank count flag (a list), -DCMP= test_mpi
# (its NNLENS_MPI_COMPARE_PROFILES case compares two profile files: headers exactly, sums within
# 1e-12 relative), -DMODEL=, -DDATA=, -DWORK= a directory, -DARGS= more profile options (a list).
file(MAKE_DIRECTORY ${WORK})
set(one ${WORK}/one.profile)
set(two ${WORK}/two.profile)
file(REMOVE ${one} ${two})
execute_process(COMMAND ${TOOL} profile ${MODEL} --data ${DATA} -o ${one} --no-progress ${ARGS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nnlens profile failed (${rc}): ${out}${err}")
endif()
execute_process(COMMAND ${MPIRUN} 2 ${TOOL} profile ${MODEL} --data ${DATA} -o ${two} --no-progress ${ARGS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mpirun -np 2 nnlens profile failed (${rc}): ${out}${err}")
endif()
# rank 0 alone writes: one summary line, naming the ranks
if(NOT out MATCHES "^[^\n]*two\\.profile: profile of [^\n]*, 2 MPI ranks, [0-9.e-]+ s\n$")
  message(FATAL_ERROR "mpirun -np 2 nnlens profile: expected one summary line from rank 0, got:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env NNLENS_MPI_COMPARE_PROFILES=${one}:${two} ${CMP} -tc=tool*
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "profiles (identical|equal within)")
  message(FATAL_ERROR "the profiles differ:\n${out}${err}")
endif()
string(REGEX MATCH "profiles [^\n]*" verdict "${out}")
message("${verdict}")
