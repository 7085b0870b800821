import AppRegistry
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Issue "Caller identity", item 2: the app registry's files, what they grant and how a bad one is refused.
@Suite("The app registry's files")
struct AppRegistryTests {
    static let good = """
        # Notes, by team ABCDE12345
        application-identifier = ABCDE12345.com.example.notes
        executable = /usr/bin/notes
        sha256 = 3F7A9C0E1D2B4A5968778695A4B3C2D1E0F1A2B3C4D5E6F708192A3B4C5D6E7F

          keychain-access-groups = ABCDE12345.com.example.shared ,ABCDE12345.com.example.notes
        administrative = no
        """

    @Test func aWellFormedFileGivesTheAppItsGroupsAndReadsBackFromWhatItWrites() throws {
        let app = try AppRegistration(parsing: Self.good, file: "notes.conf")
        #expect(app.applicationIdentifier == "ABCDE12345.com.example.notes")
        #expect(app.teamIdentifier == "ABCDE12345")
        #expect(app.executable == "/usr/bin/notes")
        #expect(
            app.digests.map(AppRegistration.hex) == ["3f7a9c0e1d2b4a5968778695a4b3c2d1e0f1a2b3c4d5e6f708192a3b4c5d6e7f"]
        )
        #expect(app.accessGroups == ["ABCDE12345.com.example.shared", "ABCDE12345.com.example.notes"])
        #expect(!app.isAdministrative)
        #expect(try AppRegistration(parsing: app.fileContents, file: "again.conf") == app)

        let plain = try AppRegistration(
            parsing: "application-identifier = T1.tool\r\nexecutable = /bin/tool\r\n", file: "t.conf")
        #expect(plain.accessGroups == ["T1.tool"], "an app always holds the group named after itself")
    }

    /// Each bad file is refused with the file and the line at fault.
    @Test(arguments: [
        (
            "application-identifier = T.app\nexecutable = /x\nkeychain-access-groups = T.a, OTHER.b\n", 3,
            "team prefix T."
        ),
        ("application-identifier = T.app\nexecutable = /x\nkeychain-access-groups = T.\n", 3, "team prefix"),
        ("application-identifier = T.app\nexecutable = /x\ncolour = blue\n", 3, "unknown key"),
        ("application-identifier = T.app\n# fine\nexecutable relative\n", 3, "key = value"),
        ("application-identifier = T.app\nexecutable = bin/x\n", 2, "absolute path"),
        ("application-identifier = T.app\nexecutable = /usr/../x\n", 2, "absolute path"),
        ("application-identifier = T.app\nsha256 = 12\n", 2, "64 hexadecimal"),
        ("application-identifier = T.app\nsha256 = " + String(repeating: "g", count: 64) + "\n", 2, "64 hexadecimal"),
        ("application-identifier = T.app\nexecutable = /x\nexecutable = /y\n", 3, "given twice (first on line 2)"),
        ("application-identifier = noteam\nexecutable = /x\n", 1, "TEAMID.reverse.dns"),
        ("application-identifier = T-1.app\nexecutable = /x\n", 1, "TEAMID.reverse.dns"),
        ("application-identifier = unregistered.app\nexecutable = /x\n", 1, "reserved"),
        ("application-identifier = T.app\nexecutable = /x\nadministrative = maybe\n", 3, "yes or no"),
        ("application-identifier = T.app\nexecutable =\n", 2, "has no value"),
        ("application-identifier = T.app\nexecutable = /x\u{7}y\n", 2, "control character"),
        ("executable = /x\n", 0, "application-identifier is missing"),
        ("application-identifier = T.app\nadministrative = yes\n", 0, "names no program"),
    ])
    func aMalformedFileIsRefusedNamingFileAndLine(text: String, line: Int, message: String) {
        #expect {
            try AppRegistration(parsing: text, file: "bad.conf")
        } throws: { error in
            guard let error = error as? RegistrationError else { return false }
            return error.file == "bad.conf" && error.line == line && error.message.contains(message)
                && error.description.hasPrefix(line > 0 ? "bad.conf:\(line): " : "bad.conf: ")
        }
    }

    @Test func aLineOrFileTooLongIsRefused() {
        let longLine = "application-identifier = T." + String(repeating: "a", count: 5_000) + "\n"
        #expect(throws: RegistrationError.self) { try AppRegistration(parsing: longLine, file: "long.conf") }
        let longFile =
            "application-identifier = T.app\nexecutable = /x\n" + String(repeating: "# padding\n", count: 7_000)
        #expect(throws: RegistrationError.self) { try AppRegistration(parsing: longFile, file: "long.conf") }
    }

    /// The directory: only `*.conf` files count; one that others may write, or that names a program an earlier
    /// file names, is left out and said why; the rest still count.
    @Test func aDirectoryKeepsGoodFilesAndSaysWhyItLeftOthersOut() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("apps.d-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func write(_ name: String, _ text: String, mode: mode_t = 0o644) throws {
            try Data(text.utf8).write(to: URL(fileURLWithPath: directory + "/" + name))
            chmod(directory + "/" + name, mode)
        }
        let digest = String(repeating: "ab", count: 32)
        try write("a-notes.conf", "application-identifier = T.notes\nexecutable = /usr/bin/notes\n")
        try write(
            "b-pinned.conf", "application-identifier = T.pinned\nexecutable = /usr/bin/notes\nsha256 = \(digest)\n")
        try write("c-again.conf", "application-identifier = T.again\nexecutable = /usr/bin/notes\n")
        try write("d-writable.conf", "application-identifier = T.open\nexecutable = /usr/bin/open\n", mode: 0o666)
        try write("e-broken.conf", "application-identifier = T.b\nexecutable = /x\nkeychain-access-groups = U.x\n")
        try write("notes.conf~", "application-identifier = T.backup\nexecutable = /usr/bin/backup\n")

        let registry = AppRegistry(directory: directory)
        #expect(registry.registrations.map(\.file) == ["a-notes.conf", "b-pinned.conf"])
        #expect(registry.problems.map(\.file) == ["c-again.conf", "d-writable.conf", "e-broken.conf"])
        #expect(registry.problems[0].message.contains("already registered by a-notes.conf"))
        #expect(registry.problems[1].message.contains("written by others"))
        #expect(registry.problems[2].description.hasPrefix("e-broken.conf:3: "))

        // The pinned build is the pinned app; any other file at the path is the path's app; elsewhere, none.
        #expect(
            registry.registration(path: "/usr/bin/notes") { AppRegistration.digest(hex: digest) }?.file
                == "b-pinned.conf")
        #expect(registry.registration(path: "/usr/bin/notes") { Data(count: 32) }?.file == "a-notes.conf")
        #expect(registry.registration(path: "/usr/bin/other") { AppRegistration.digest(hex: digest) } == nil)

        // A change is seen: the fingerprint differs once a file is edited.
        let before = AppRegistry.Fingerprint(directory: directory)
        try write("a-notes.conf", "application-identifier = T.notes\nexecutable = /usr/bin/notes2\n")
        #expect(AppRegistry.Fingerprint(directory: directory) != before)
    }
}
