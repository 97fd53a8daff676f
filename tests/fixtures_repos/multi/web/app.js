import { formatName } from './format';
import { View } from './view';

/**
 * The application shell.
 *
 * Details that are not in the card doc.
 */
export class App extends View {
  constructor(name) {
    super();
    this.name = name;
  }

  render() {
    return this.title() + formatName(this.name);
  }

  title() {
    return 'App';
  }
}

// Start the app.
export function main() {
  const app = new App('demo');
  return app.render();
}

const helper = (x) => x * 2;
