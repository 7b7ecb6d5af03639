# Installs the files that name install paths: the systemd unit, the
# configuration and the man pages. Run by `cmake --install` (install(SCRIPT)),
# so the paths follow the prefix of the install, which `cmake --install
# --prefix DIR` (make install PREFIX=DIR) may change after the configure
# step; paths computed when configuring would name the old prefix.
# The caller sets BLOOMERY_SOURCE_DIR, BLOOMERY_BINARY_DIR, BLOOMERY_BINDIR,
# BLOOMERY_SYSCONFDIR, BLOOMERY_MANDIR and BLOOMERY_SYSTEMD_UNITDIR as
# configured (relative: under the prefix). DESTDIR applies as to any install.

function(bloomery_full_path out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

# The configuration directory as GNUInstallDirs places it: /etc for the
# prefixes /usr and /, /etc/opt/NAME for /opt/NAME, else under the prefix.
if(IS_ABSOLUTE "${BLOOMERY_SYSCONFDIR}")
  set(etc "${BLOOMERY_SYSCONFDIR}")
elseif(CMAKE_INSTALL_PREFIX MATCHES "^/(usr/?)?$")
  set(etc "/${BLOOMERY_SYSCONFDIR}")
elseif(CMAKE_INSTALL_PREFIX MATCHES "^/opt/([^/]+)/?$")
  set(etc "/${BLOOMERY_SYSCONFDIR}/opt/${CMAKE_MATCH_1}")
else()
  set(etc "${CMAKE_INSTALL_PREFIX}/${BLOOMERY_SYSCONFDIR}")
endif()
bloomery_full_path(bindir "${BLOOMERY_BINDIR}")
bloomery_full_path(mandir "${BLOOMERY_MANDIR}")
bloomery_full_path(unitdir "${BLOOMERY_SYSTEMD_UNITDIR}")
set(conf "${etc}/bloomery/bloomery.conf")

set(stage "${BLOOMERY_BINARY_DIR}/dist/install")
file(MAKE_DIRECTORY "${stage}")
file(READ "${BLOOMERY_SOURCE_DIR}/dist/bloomeryd.service.in" unit)
string(REPLACE "@BLOOMERYD@" "${bindir}/bloomeryd" unit "${unit}")
string(REPLACE "@BLOOMERY_CONF@" "${conf}" unit "${unit}")
file(WRITE "${stage}/bloomeryd.service" "${unit}")
file(INSTALL DESTINATION "${unitdir}" TYPE FILE FILES "${stage}/bloomeryd.service")

file(INSTALL DESTINATION "${etc}/bloomery" TYPE FILE
  FILES "${BLOOMERY_BINARY_DIR}/dist/bloomery.conf")

# The man pages name the configuration where this install puts it.
foreach(page bloomeryd.1 bloomery.1 bloomery.conf.5)
  file(READ "${BLOOMERY_SOURCE_DIR}/man/${page}" text)
  string(REPLACE "/etc/bloomery/bloomery.conf" "${conf}" text "${text}")
  file(WRITE "${stage}/${page}" "${text}")
  string(REGEX REPLACE ".*\\." "" section "${page}")
  file(INSTALL DESTINATION "${mandir}/man${section}" TYPE FILE FILES "${stage}/${page}")
endforeach()
