import EmbeddedEngine
import Foundation
import SecurityClient
import Testing

@Suite("Embedded configuration")
struct ConfigurationTests {
    @Test func storeLocationFollowsTheEnvironment() {
        #expect(
            EmbeddedConfiguration.defaultDataDirectory([
                "LA_DATA_DIR": "/tmp/x", "XDG_DATA_HOME": "/data", "HOME": "/home/u",
            ]).path
                == "/tmp/x")
        #expect(
            EmbeddedConfiguration.defaultDataDirectory(["XDG_DATA_HOME": "/data", "HOME": "/home/u"]).path
                == "/data/local-authentication")
        #expect(
            EmbeddedConfiguration.defaultDataDirectory(["XDG_DATA_HOME": "relative", "HOME": "/home/u"]).path
                == "/home/u/.local/share/local-authentication")
        #expect(
            EmbeddedConfiguration.defaultDataDirectory(["HOME": "/home/u"]).path
                == "/home/u/.local/share/local-authentication")
    }

    @Test func accessGroupsComeFromTheEnvironmentOrTheExecutable() {
        let configured = EmbeddedConfiguration.fromEnvironment(["LA_ACCESS_GROUPS": "team.app, shared ,", "HOME": "/h"])
        #expect(configured.accessGroups == ["team.app", "shared"])
        #expect(!configured.mayAccessAllGroups)
        let derived = EmbeddedConfiguration.fromEnvironment(["HOME": "/h"])
        #expect(derived.accessGroups.count == 1)
        #expect(derived.accessGroups[0].hasPrefix("local.") && derived.accessGroups[0].count > "local.".count)
    }

    @Test func messagesRoundTripOnlyWhenTheEnvironmentAsks() {
        #expect(!EmbeddedConfiguration.roundTripsMessages([:]))
        #expect(!EmbeddedConfiguration.roundTripsMessages(["LA_PROTOCOL_ROUNDTRIP": "0"]))
        #expect(!EmbeddedConfiguration.roundTripsMessages(["LA_PROTOCOL_ROUNDTRIP": "yes"]))
        #expect(EmbeddedConfiguration.roundTripsMessages(["LA_PROTOCOL_ROUNDTRIP": "1"]))
    }
}
