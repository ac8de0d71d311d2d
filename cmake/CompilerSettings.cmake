# Project-wide compiler settings, applied to every target through ggufd_options.
add_library(ggufd_options INTERFACE)
target_compile_options(ggufd_options INTERFACE -Wall -Wextra -Wshadow=local -Wnon-virtual-dtor)
if(GGUFD_WERROR)
    target_compile_options(ggufd_options INTERFACE -Werror)
endif()
# Sources include each other from the repository root: "gguf/file.h", "engine/kernels/...".
target_include_directories(ggufd_options INTERFACE ${PROJECT_SOURCE_DIR})

if(GGUFD_SANITIZE)
    set(_san "-fsanitize=${GGUFD_SANITIZE}")
    target_compile_options(ggufd_options INTERFACE ${_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    target_link_options(ggufd_options INTERFACE ${_san})
    # GCC's -Wmaybe-uninitialized is unreliable with sanitizer instrumentation: at -O1 it reports
    # std::function members inside libstdc++'s <regex> (gguf/naming.cpp) that are initialized.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
        target_compile_options(ggufd_options INTERFACE -Wno-maybe-uninitialized)
    endif()
endif()

# One helper so every library and executable gets the same treatment.
function(ggufd_target name)
    target_link_libraries(${name} PRIVATE ggufd_options)
endfunction()
