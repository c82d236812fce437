import '@xterm/xterm/css/xterm.css';
import './styles.css';
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { apiKey, signOut } from './api.js';
import { SessionPage } from './session-page.js';
import { SessionsPage } from './sessions-page.js';
import { SignIn } from './sign-in.js';

/** The page the hash names: `#/sessions` (default) or `#/sessions/<id>`. */
function useRoute(): string {
  const [route, setRoute] = useState(location.hash.slice(1) || '/sessions');
  useEffect(() => {
    const changed = () => setRoute(location.hash.slice(1) || '/sessions');
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return route;
}

function App() {
  const [signedIn, setSignedIn] = useState(apiKey() !== null);
  const route = useRoute();
  if (!signedIn) return <SignIn onSignedIn={() => setSignedIn(true)} />;
  const session = /^\/sessions\/(ses_[a-z0-9]+)$/.exec(route)?.[1];
  return (
    <>
      <header>
        <strong>SPACE</strong>
        <a href="#/sessions">Sessions</a>
        <span class="spacer" />
        <button
          type="button"
          onClick={() => {
            signOut();
            setSignedIn(false);
          }}
        >
          Sign out
        </button>
      </header>
      <main>{session ? <SessionPage id={session} /> : <SessionsPage />}</main>
    </>
  );
}

render(<App />, document.getElementById('root')!);
