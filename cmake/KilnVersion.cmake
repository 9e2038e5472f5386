# Run at build time (cmake -P): writes OUT, the version Kiln reports and
# stamps on its compiled artifacts, from VERSION and the git commit of
# SOURCE_DIR ("+dirty" when the tree has changes, "unknown" outside git).
# The file is rewritten only when that changes, so a build recompiles only
# what includes it.
execute_process(COMMAND git -C ${SOURCE_DIR} rev-parse --short=12 HEAD
  OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET RESULT_VARIABLE failed)
if(failed)
  set(commit "unknown")
else()
  execute_process(COMMAND git -C ${SOURCE_DIR} status --porcelain --untracked-files=no
    OUTPUT_VARIABLE changes ERROR_QUIET)
  if(changes)
    string(APPEND commit "+dirty")
  endif()
endif()
set(text "#define KILN_VERSION \"${VERSION}\"\n#define KILN_COMMIT \"${commit}\"\n")
set(old "")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUT} "${text}")
endif()
