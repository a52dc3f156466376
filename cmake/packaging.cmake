# Installing and packaging saferun (README "Install", docs/deploy.md): what
# goes where, saferun.pc, the man pages and the .deb packages CPack builds
# (scripts/package). Three components, one .deb each:
#   tools    (saferun)         saferun, saferund, the systemd units, the
#                              policies, the rootfs profiles and scripts, man pages
#   library  (libsaferun0)     libsaferun.so.0
#   dev      (libsaferun-dev)  saferun.h, libsaferun.so, libsaferun.a, saferun.pc
# The paths compiled into saferun (main.c, shipped_path) are the ones below,
# under CMAKE_INSTALL_PREFIX: the packages install under that same prefix
# (scripts/package configures /usr).
include(GNUInstallDirs)
set(SAFERUN_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/saferun)
set(SAFERUN_INSTALL_LIBEXECDIR ${CMAKE_INSTALL_LIBEXECDIR}/saferun)

install(TARGETS saferun saferund RUNTIME COMPONENT tools)
install(TARGETS saferun_shared LIBRARY COMPONENT library NAMELINK_COMPONENT dev)
install(TARGETS saferun_static ARCHIVE COMPONENT dev)
install(FILES runtime/include/saferun.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT dev)
install(FILES docs/examples/embed.c DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/libsaferun-dev/examples
        COMPONENT dev)

configure_file(cmake/saferun.pc.in ${CMAKE_BINARY_DIR}/saferun.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/saferun.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
        COMPONENT dev)

install(DIRECTORY policies/ DESTINATION ${SAFERUN_INSTALL_DATADIR}/policies COMPONENT tools
        FILES_MATCHING PATTERN "*.json")
install(DIRECTORY rootfs/profiles/ DESTINATION ${SAFERUN_INSTALL_DATADIR}/profiles COMPONENT tools
        FILES_MATCHING PATTERN "*.txt")
install(PROGRAMS scripts/build-rootfs scripts/import-rootfs DESTINATION ${SAFERUN_INSTALL_LIBEXECDIR}
        COMPONENT tools)

# The unit in the source tree names /usr/local/bin/saferund (for a manual
# copy after `cmake --install build`); the installed one names where this
# prefix puts it.
set(SAFERUN_UNIT_SRC ${CMAKE_SOURCE_DIR}/runtime/daemon/systemd/saferund.service)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${SAFERUN_UNIT_SRC})
file(READ ${SAFERUN_UNIT_SRC} SAFERUN_UNIT)
string(REPLACE "ExecStart=/usr/local/bin/saferund" "ExecStart=${CMAKE_INSTALL_FULL_BINDIR}/saferund"
       SAFERUN_UNIT "${SAFERUN_UNIT}")
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/systemd/saferund.service CONTENT "${SAFERUN_UNIT}")
install(FILES ${CMAKE_BINARY_DIR}/systemd/saferund.service
              runtime/daemon/systemd/saferund.socket
        DESTINATION lib/systemd/system COMPONENT tools)

# Man pages: docs/man/PAGE.md holds the NAME and SYNOPSIS and includes the
# docs/ page that is the reference (cli.md, deploy.md, policy.md), so the
# two never differ; scripts/man-page expands it and go-md2man (Debian's
# go-md2man, installed by scripts/bootstrap) writes the roff.
set(SAFERUN_MAN_PAGES saferun.1 saferund.8 saferun-policy.5)
option(SAFERUN_REQUIRE_MAN "Fail when go-md2man is missing instead of skipping the man pages" OFF)
find_program(GO_MD2MAN go-md2man)
find_program(SAFERUN_PYTHON3 python3 REQUIRED)
if(GO_MD2MAN)
  file(GLOB SAFERUN_DOCS CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/docs/*.md)
  set(SAFERUN_MAN_OUTPUTS)
  foreach(page IN LISTS SAFERUN_MAN_PAGES)
    string(REGEX MATCH "[0-9]$" section ${page})
    set(out ${CMAKE_BINARY_DIR}/man/${page})
    add_custom_command(OUTPUT ${out}
      COMMAND ${SAFERUN_PYTHON3} ${CMAKE_SOURCE_DIR}/scripts/man-page --md2man ${GO_MD2MAN}
              --version ${PROJECT_VERSION} ${CMAKE_SOURCE_DIR}/docs/man/${page}.md ${out}
      DEPENDS ${CMAKE_SOURCE_DIR}/docs/man/${page}.md ${SAFERUN_DOCS}
              ${CMAKE_SOURCE_DIR}/scripts/man-page
      COMMENT "Writing the man page ${page}"
      VERBATIM)
    list(APPEND SAFERUN_MAN_OUTPUTS ${out})
    install(FILES ${out} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section} COMPONENT tools)
  endforeach()
  add_custom_target(man ALL DEPENDS ${SAFERUN_MAN_OUTPUTS})
elseif(SAFERUN_REQUIRE_MAN)
  message(FATAL_ERROR "go-md2man not found: the man pages need it (apt-get install go-md2man, "
                      "or scripts/bootstrap)")
else()
  message(WARNING "go-md2man not found: no man pages (apt-get install go-md2man)")
endif()

# The .debs: `cpack -G DEB` in a build dir (scripts/package). Depends are
# Debian 12's package names for what the binaries link (the CLI and the
# daemon link libsaferun statically); tests/package proves them enough by
# installing the .debs with apt into a fresh Debian rootfs and running there.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME saferun)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "saferun maintainers <saferun@localhost>")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL tools library dev)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
# A shlibs file and ldconfig in postinst/postrm for libsaferun0 (the only package
# with a shared library).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(SAFERUN_DEB_LIBS "libc6, libseccomp2, libcap2, libnl-3-200, libnl-route-3-200, libcjson1")

set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME saferun)
# python3: the host profile's interpreter and scripts/import-rootfs;
# mmdebstrap: `saferun rootfs build`; libnftables1: egress (dlopen()ed).
set(CPACK_DEBIAN_TOOLS_PACKAGE_DEPENDS "${SAFERUN_DEB_LIBS}, libmicrohttpd12, python3")
set(CPACK_DEBIAN_TOOLS_PACKAGE_RECOMMENDS "mmdebstrap, libnftables1")
set(CPACK_DEBIAN_TOOLS_DESCRIPTION
    "run untrusted Python in Linux sandboxes: the saferun CLI and saferund daemon
Namespaces, cgroups, seccomp and a pre-execution checker, without Docker;
saferund serves REST and MCP over a unix socket (systemd units included).")

set(CPACK_DEBIAN_LIBRARY_PACKAGE_NAME libsaferun0)
set(CPACK_DEBIAN_LIBRARY_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIBRARY_PACKAGE_DEPENDS "${SAFERUN_DEB_LIBS}")
set(CPACK_DEBIAN_LIBRARY_PACKAGE_RECOMMENDS "python3, libnftables1")
set(CPACK_DEBIAN_LIBRARY_DESCRIPTION "saferun sandbox library (libsaferun.so.0)
Embeds saferun's sandboxes in an application: saferun.h's sr_run.")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libsaferun-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
# saferun.pc's Requires.private: pkg-config needs their .pc files.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libsaferun0 (= ${PROJECT_VERSION}), libseccomp-dev, libcap-dev, libnl-3-dev, libnl-route-3-dev, libcjson-dev")
set(CPACK_DEBIAN_DEV_DESCRIPTION "saferun sandbox library: headers, static library, pkg-config file
saferun.h, libsaferun.a and saferun.pc (pkg-config --cflags --libs saferun).")
include(CPack)
