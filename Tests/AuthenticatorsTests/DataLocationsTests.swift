import Foundation
import StoreFiles
import Testing

/// The one rule for where things live, which the keychain, the authenticators, lactl and the agent share.
@Suite("Data locations")
struct DataLocationsTests {
    @Test func theDataDirectoryFollowsLADataDirThenXDGThenHome() {
        #expect(DataLocations.dataDirectory(["LA_DATA_DIR": "/srv/la", "XDG_DATA_HOME": "/x"]).path == "/srv/la")
        #expect(
            DataLocations.dataDirectory(["LA_DATA_DIR": "", "XDG_DATA_HOME": "/x"]).path == "/x/local-authentication")
        // A relative XDG_DATA_HOME is ignored, as the XDG specification says.
        #expect(
            DataLocations.dataDirectory(["XDG_DATA_HOME": "x", "HOME": "/home/a"]).path
                == "/home/a/.local/share/local-authentication")
        #expect(
            DataLocations.runtimeDirectory(["XDG_RUNTIME_DIR": "/run/user/1000"]).path
                == "/run/user/1000/local-authentication")
    }

    @Test func theCurrentUserIsTheEffectiveUidsName() {
        let name = DataLocations.currentUserName()
        #expect(name != nil)
        if let name { #expect(getpwnam(name)?.pointee.pw_uid == geteuid()) }
    }
}
