import ArgumentParser
import Foundation
import KeychainServices
import LocalAuthentication
import SSHAgent
import StoreFiles

/// `lactl ssh-key …`: SSH keys that are persisted rights.
struct SSHKeys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-key",
        abstract: "Create, list, remove and show SSH keys held by the enclave behind your fingerprint.",
        subcommands: [CreateSSHKey.self, ListSSHKeys.self, RemoveSSHKey.self, PublicSSHKey.self])
}

struct CreateSSHKey: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create", abstract: "Create an ecdsa-sha2-nistp256 key that signs only after an authentication.")

    @Argument(help: "The key's name (letters, digits, '-', '_', '.').") var name: String

    @Option(
        help: """
            What each signature needs: biometryCurrentSet (a finger enrolled now; the key dies when the fingers change), \
            biometry (any enrolled finger), userPresence (a finger or the passcode), devicePasscode (a finger or the \
            passcode, as Apple has no passcode-only requirement).
            """)
    var requirement: String = AgentKeyring.Requirement.biometryCurrentSet.rawValue

    @Option(
        help: """
            For how many seconds one approval lets the same program (by executable) sign again with this key without         asking; 0 asks every time. At most 300 (Apple's limit) unless --allow-long-reuse.
            """)
    var reuse: Int = 0

    @Flag(help: "Allow a reuse window longer than 300 seconds (up to 86400).")
    var allowLongReuse = false

    func run() async throws {
        guard let requirement = AgentKeyring.Requirement(rawValue: requirement) else {
            throw ValidationError("unknown requirement '\(requirement)'")
        }
        let key = try await sshReporting {
            try await AgentKeyring().create(
                name, requirement: requirement, reuseSeconds: reuse, allowLongReuse: allowLongReuse)
        }
        print(key.authorizedKeysLine)
    }
}

struct ListSSHKeys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List the SSH keys.")

    func run() async throws {
        let keys = try await sshReporting { try await AgentKeyring().keys() }
        if keys.isEmpty { print("No SSH keys.") }
        for key in keys {
            print("\(key.name)\t\(key.requirement)\treuse \(key.reuseSeconds) s\t\(key.authorizedKeysLine)")
        }
    }
}

struct RemoveSSHKey: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove an SSH key for good.")

    @Argument(help: "The key's name.") var name: String

    func run() async throws {
        try await sshReporting { try await AgentKeyring().remove(name) }
        print("Removed SSH key \(name).")
    }
}

struct PublicSSHKey: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "public", abstract: "Print the key's authorized_keys line.")

    @Argument(help: "The key's name.") var name: String

    func run() async throws {
        print(try await sshReporting { try await AgentKeyring().key(name) }.authorizedKeysLine)
    }
}

/// `lactl ssh-agent`: the OpenSSH agent protocol over a Unix socket, for the keys above.
struct SSHAgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ssh-agent",
        abstract: "Serve the SSH keys to ssh, ssh-add and ssh-keygen; every signature needs an authentication.",
        discussion: """
            Prints SSH_AUTH_SOCK=PATH for `eval $(lactl ssh-agent)`-style use, then serves until stopped. \
            Each prompt goes where the user is: the terminal of the ssh (or ssh-keygen, ssh-add) that asked, read \
            only while that program is in the foreground; else the agent's own terminal; else a desktop \
            notification (notify-send); else the agent's standard error. A passcode is asked only on a terminal. \
            One line on standard error after each use of a key.
            """)

    @Option(help: "The socket (default: $XDG_RUNTIME_DIR/local-authentication/ssh-agent.sock).")
    var socket: String?

    func run() async throws {
        let path = socket ?? Self.defaultSocketPath()
        try FileManager.default.createDirectory(
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o700])
        let agent = Agent(prompts: .automatic) { line in FileHandle.standardError.write(Data((line + "\n").utf8)) }
        let server = try await AgentServer(path: path, agent: agent)
        FileHandle.standardOutput.write(Data("SSH_AUTH_SOCK=\(path); export SSH_AUTH_SOCK;\n".utf8))
        try await server.run()
    }

    static func defaultSocketPath() -> String {
        DataLocations.runtimeDirectory().appendingPathComponent("ssh-agent.sock").path
    }
}

/// Runs `body`, reporting a failure on standard error with exit status 1 (44 for a key that does not exist).
func sshReporting<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch {
        FileHandle.standardError.write(Data("lactl: \(error.localizedDescription)\n".utf8))
        throw ExitCode((error as NSError).code == Int(errSecItemNotFound) ? 44 : 1)
    }
}
