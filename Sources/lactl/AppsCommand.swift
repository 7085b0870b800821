import AppRegistry
import ArgumentParser
import Foundation
import SecureCrypto
import StoreFiles

/// `lactl apps`: the app registry localauthd identifies programs by (`<config-directory>/apps.d`, one file per app;
/// format in docs/APP-REGISTRY.md). Registering and removing need root: a registration grants access groups.
struct Apps: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Register, list and remove the applications localauthd tells apart (root only for changes).",
        discussion: """
            localauthd reads the registry again when a file changes, and on SIGHUP. A program with no registration
            holds one private access group, unregistered.<SHA-256 of its executable>.
            """,
        subcommands: [RegisterApp.self, ListApps.self, RemoveApp.self])
}

/// Where the registry is.
struct RegistryOptions: ParsableArguments {
    @Option(help: "localauthd's configuration directory; the registry is its apps.d.")
    var configDirectory = "/etc/localauthd"

    var directory: String { configDirectory + "/apps.d" }

    /// Refuses unless running as root: only who may grant access groups may change the registry.
    func requireRoot() throws {
        guard geteuid() == 0 else {
            throw ValidationError("changing the app registry needs root (sudo lactl apps …)")
        }
    }
}

struct RegisterApp: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "register",
        abstract: "Register the program at PATH as an application.",
        discussion: """
            Writes <application-identifier>.conf. Every --group must start with the identifier's team prefix
            (TEAMID.). The executable's SHA-256 is recorded, so only this build at PATH is the app (register again
            after an upgrade); --path-only leaves it out, so whatever file lies at PATH is the app: only for a
            path nobody but root can write.

            An interpreter (python3, perl, node, bash, java and others) is refused: every script it runs would be the app,
            since a script's process runs the interpreter. --interpreter registers it all the same. A script itself
            cannot be registered: register a compiled program.
            """)

    @OptionGroup var registry: RegistryOptions
    @Argument(help: "The program's executable.") var path: String
    @Option(name: .customLong("application-identifier"), help: "TEAMID.reverse.dns") var applicationIdentifier: String
    @Option(name: .customLong("group"), help: "A keychain access group (repeat for several; the first is the default).")
    var groups: [String] = []
    @Option(
        name: .customLong("app-group"),
        help:
            "An app group the app belongs to (group.com.example.shared; repeat for several), as Apple's application-groups entitlement."
    )
    var appGroups: [String] = []
    @Flag(help: .hidden) var pin = false
    @Flag(help: "Do not record the executable's SHA-256: any file at PATH is the app (warns).") var pathOnly = false
    @Flag(help: "Register an interpreter, knowing every script it runs becomes the app.") var interpreter = false
    @Flag(help: "An administrative tool: it may act in every access group of its user.") var administrative = false
    @Flag(
        help: "The program draws its own prompts even while a prompt agent (lactl agent) runs, and sees the passcode.")
    var ownPrompts = false

    func run() throws {
        try registry.requireRoot()
        let executable = (path as NSString).resolvingSymlinksInPath
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw ValidationError("\(path) is not an executable file")
        }
        if let handle = FileHandle(forReadingAtPath: executable), let start = try? handle.read(upToCount: 2),
            start == Data("#!".utf8)
        {
            throw ValidationError(
                "\(path) is a script: its process runs its interpreter, which is what localauthd sees; register a "
                    + "compiled program instead")
        }
        if AppRegistration.isInterpreter(executable) && !interpreter {
            throw ValidationError(
                "\(executable) runs scripts: registered, every script it runs would be \(applicationIdentifier) "
                    + "(a script's identity is its interpreter's); pass --interpreter if that is meant")
        }
        if pin && pathOnly { throw ValidationError("--pin and --path-only contradict each other") }
        var registration = AppRegistration(
            applicationIdentifier: applicationIdentifier, executable: executable, keychainAccessGroups: groups,
            isAdministrative: administrative, isInterpreter: interpreter, drawsOwnPrompts: ownPrompts,
            applicationGroups: appGroups)
        if pathOnly {
            FileHandle.standardError.write(
                Data(
                    ("warning: \(applicationIdentifier) is registered by path only: whoever can write \(executable) "
                        + "or its directory can be the app\n").utf8))
        } else {
            registration.digests = [try Self.digest(of: executable)]
        }
        let name = applicationIdentifier + ".conf"
        // What the daemon will read, checked the way it will read it.
        do {
            registration = try AppRegistration(parsing: registration.fileContents, file: name)
        } catch {
            throw ValidationError(error.message)
        }
        try FileManager.default.createDirectory(
            atPath: registry.directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let file = registry.directory + "/" + name
        try PrivateFiles.writeAtomically(Data(registration.fileContents.utf8), to: file)
        chmod(file, 0o644)
        print("registered \(applicationIdentifier): \(file)")
    }

    static func digest(of path: String) throws -> Data {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw ValidationError("cannot read \(path)") }
        defer { try? handle.close() }
        var hash = SHA256()
        while let chunk = try handle.read(upToCount: 1 << 16), !chunk.isEmpty { hash.update(chunk) }
        return hash.finalize()
    }
}

struct ListApps: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the registered applications and the files localauthd refuses.")

    @OptionGroup var registry: RegistryOptions

    func run() throws {
        let apps = AppRegistry(directory: registry.directory)
        if apps.registrations.isEmpty && apps.problems.isEmpty {
            print("no application is registered in \(registry.directory)")
        }
        for (file, app) in apps.registrations {
            print("\(app.applicationIdentifier)\(app.isAdministrative ? " (administrative)" : "")  [\(file)]")
            if let executable = app.executable { print("  executable: \(executable)") }
            for digest in app.digests { print("  sha256: \(digest.hexString)") }
            print("  access groups: \(app.accessGroups.joined(separator: ", "))")
        }
        for problem in apps.problems { print("refused: \(problem)") }
    }
}

struct RemoveApp: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove an application's registration (its items stay in their groups).")

    @OptionGroup var registry: RegistryOptions
    @Argument(help: "The application identifier.") var applicationIdentifier: String

    func run() throws {
        try registry.requireRoot()
        let apps = AppRegistry(directory: registry.directory)
        let files = apps.registrations.filter { $0.registration.applicationIdentifier == applicationIdentifier }.map(
            \.file)
        guard !files.isEmpty else {
            throw ValidationError("\(applicationIdentifier) is not registered in \(registry.directory)")
        }
        for file in files {
            try PrivateFiles.remove(registry.directory + "/" + file)
            print("removed \(applicationIdentifier): \(registry.directory)/\(file)")
        }
    }
}
