/// A position in the configuration tree, rendered as `routes[1].auth`.
struct ConfigKeyPath: Sendable, Hashable, CustomStringConvertible {
    private var rendered: String

    static let root = ConfigKeyPath(rendered: "")

    private init(rendered: String) {
        self.rendered = rendered
    }

    func key(_ name: String) -> ConfigKeyPath {
        ConfigKeyPath(rendered: rendered.isEmpty ? name : rendered + "." + name)
    }

    func index(_ index: Int) -> ConfigKeyPath {
        ConfigKeyPath(rendered: rendered + "[\(index)]")
    }

    var description: String { rendered }
}
